import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { suite } from '../../helpers/suite.js';
import * as assert from 'uvu/assert';
import { startCluster, type RunningCluster } from '../../helpers/cluster.js';
import { testStoresEnv } from '../../helpers/test-stores-env.js';
import { createTestDatabase } from '../../helpers/database.js';

// The README's first screen is what a newcomer types. Its commands are read from README.md (not
// copied here), pointed at a service started as `npm start` starts it, and run with bash in order,
// as one shell session: each must succeed, and the task they create must be listed.

/** The address the README's commands use; replaced by the test service's. */
const README_ADDRESS = 'localhost:8000';

/** The commands of the first screen (everything above the first `---`), in order. */
function quickstartCommands(readme: string): string[] {
  const firstScreen = readme.split(/^---$/m)[0] ?? '';
  const blocks = [...firstScreen.matchAll(/^```(?:sh|bash|shell)\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
  return blocks.flatMap(splitCommands);
}

/**
 * Splits shell text into its commands: a newline ends one unless it is escaped or inside quotes
 * or `$( … )`. Comments and blank lines are dropped.
 */
function splitCommands(text: string): string[] {
  const commands: string[] = [];
  let current = '';
  let quote: "'" | '"' | null = null;
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const char = text[i]!;
    if (quote === "'") {
      if (char === "'") quote = null;
    } else if (char === '\\') {
      current += char + (text[i + 1] ?? '');
      i++;
      continue;
    } else if (quote === '"') {
      if (char === '"') quote = null;
    } else if (char === "'" || char === '"') {
      quote = char;
    } else if (char === '#' && (current === '' || /\s$/.test(current))) {
      while (i + 1 < text.length && text[i + 1] !== '\n') i++;
      continue;
    } else if (char === '$' && text[i + 1] === '(') {
      depth++;
    } else if (char === ')' && depth > 0) {
      depth--;
    } else if (char === '\n' && depth === 0) {
      if (current.trim()) commands.push(current.trim());
      current = '';
      continue;
    }
    current += char;
  }
  if (current.trim()) commands.push(current.trim());
  return commands;
}

/** What starts the service or runs the suite: the test does the first itself and never the second. */
const isServiceOrSuite = (command: string) => /^npm (start|test)\b/.test(command);

interface Step {
  command: string;
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs `commands` in one bash session (a variable one sets is seen by the next), stopping at the
 * first that fails; each one's exit status and output.
 */
async function runInBash(commands: string[], env: Record<string, string>, parent: string): Promise<Step[]> {
  const dir = await mkdtemp(join(parent, 'run-'));
  const file = (i: number, kind: string) => `"${join(dir, `${i}.${kind}`)}"`;
  const script = commands
    .map(
      (command, i) =>
        `{ ${command}\n} >${file(i, 'out')} 2>${file(i, 'err')}\nrc=$?; echo $rc >${file(i, 'rc')}; [ $rc -eq 0 ] || exit $rc\n`,
    )
    .join('');
  const child = spawn('bash', ['-c', script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), 45_000);
  await once(child, 'exit');
  clearTimeout(timer);
  const read = (i: number, kind: string) => readFile(join(dir, `${i}.${kind}`), 'utf8').catch(() => null);
  const steps: Step[] = [];
  for (const [i, command] of commands.entries()) {
    const rc = await read(i, 'rc');
    if (rc === null) break;
    steps.push({
      command,
      code: Number(rc),
      stdout: (await read(i, 'out')) ?? '',
      stderr: `${(await read(i, 'err')) ?? ''}${output}`,
    });
  }
  return steps;
}

const describeStep = (step: Step) =>
  `\n$ ${step.command}\nexit ${step.code}\nstdout: ${step.stdout}\nstderr: ${step.stderr}`;

const Quickstart = suite<{
  cluster: RunningCluster;
  dir: string;
  env: Record<string, string>;
  commands: string[];
  drop(): Promise<void>;
}>("the README's quickstart, run as written against a running service");

Quickstart.before(async (context) => {
  const readme = await readFile('README.md', 'utf8');
  const all = quickstartCommands(readme);
  assert.ok(
    all.some((command) => /^npm start\b/.test(command)),
    'the first screen shows `npm start`, which the test stands in for',
  );
  context.commands = all.filter((command) => !isServiceOrSuite(command));
  assert.ok(context.commands.length > 0, 'the first screen has commands to run once the service is up');
  assert.ok(
    context.commands.some((command) => command.includes(README_ADDRESS)),
    `the quickstart addresses the service as ${README_ADDRESS}`,
  );
  context.dir = await mkdtemp(join(process.env.TEST_TMP_DIR!, 'readme-quickstart-'));
  const database = await createTestDatabase('readme');
  context.drop = database.drop;
  // As the quickstart runs it, through `npm start` (which builds dist/ for `npm run cli` too); its
  // own DATA_DIR, so that a Paceline running in the checkout does not matter.
  context.cluster = await startCluster(
    { ...testStoresEnv('readme', database.url), DATA_DIR: context.dir, WEB_CONCURRENCY: '1' },
    60_000,
    'npm',
  );
  // The CLI finds its database as the service does: DATABASE_URL, else the embedded one under DATA_DIR.
  context.env = { DATABASE_URL: database.url, DATA_DIR: context.dir };
  context.commands = context.commands.map((command) =>
    command.replaceAll(README_ADDRESS, `127.0.0.1:${context.cluster.port}`),
  );
});

Quickstart.after(async ({ cluster, dir, drop }) => {
  await cluster?.stop('SIGTERM');
  await drop?.();
  if (dir) await rm(dir, { recursive: true, force: true });
});

Quickstart('the token command fails loudly, with the answer, while the login fails', async ({ commands, env, dir }) => {
  const tokenCommand = commands.find((command) => command.includes('/api/auth/token/'));
  assert.ok(tokenCommand, 'the quickstart logs in');
  // Before the user exists: the login is refused.
  const [step] = await runInBash([tokenCommand], env, dir);
  assert.ok(step, 'the token command ran');
  assert.is.not(step.code, 0, describeStep(step));
  assert.match(step.stderr, /^no token: .*Unable to log in with provided credentials/m, describeStep(step));
});

Quickstart('every command succeeds, in order, and the created task is listed', async ({ commands, env, dir }) => {
  const steps = await runInBash(commands, env, dir);
  for (const step of steps) assert.is(step.code, 0, describeStep(step));
  assert.is(steps.length, commands.length, `stopped after ${steps.length} of ${commands.length} commands`);
  const created = steps.find((step) => step.command.includes('-X POST') && step.command.includes('/api/tasks/'));
  assert.ok(created, 'the quickstart creates a task');
  const task = JSON.parse(created.stdout) as { id: number; title: string; owner: string };
  assert.type(task.id, 'number', describeStep(created));
  const listed = steps.at(-1)!;
  const list = JSON.parse(listed.stdout) as { results: { id: number; title: string; owner: string }[] };
  assert.equal(
    list.results.find((item) => item.id === task.id),
    task,
    describeStep(listed),
  );
});

Quickstart.run();
