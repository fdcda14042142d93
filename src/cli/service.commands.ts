import { resolve } from 'node:path';
import { describeInstance, runningInstance, type Instance } from '../cluster/instance-file.js';
import { readReloads, type ReloadRecord } from '../cluster/reload.js';
import {
  formatThrottled,
  scopesShown,
  takeThrottledAnswer,
  THROTTLED_SIGNAL,
  type ThrottledAnswer,
} from '../cluster/throttled-file.js';
import type { Config } from '../settings/config.js';
import type { Command, CommandContext } from './command.js';
import { fail, say } from './output.js';
import { readClientLimits } from './throttled-limits.js';
import { printLastUserChange } from './user-listings.js';

/** `status`: whether a Paceline runs on DATA_DIR (exit 3 when not), and the last change of user:audit. */
export const status: Command = {
  usage: `  status             whether a Paceline runs on DATA_DIR: its primary's PID and ports, and the
                     last change of user:audit`,
  needs: 'settings',
  run: async (_args, context) => {
    const running = runningInstance(context.config);
    if (!running) return notRunning(context.config);
    process.stdout.write(
      `Paceline is running on DATA_DIR ${running.dataDir}: ${describeInstance(running)}, since ` +
        `${running.startedAt}\n`,
    );
    return printLastUserChange(context.withDatabase);
  },
};

/** `stop`: SIGTERM to the primary recorded under DATA_DIR (exit 3 when none runs). */
export const stop: Command = {
  usage: `  stop               stop it (SIGTERM to its primary: a drain, then its stores)`,
  needs: 'settings',
  run: (_args, context) => signalPrimary(context, 'SIGTERM'),
};

/**
 * `reload [--pid PID]`: SIGHUP to the primary recorded under DATA_DIR (or PID), then waits for what
 * it records of that reload: applied (exit 0), refused or abandoned (exit 1), none in time (exit 1).
 */
export const reload: Command = {
  usage: `  reload [--pid PID]
                     reload it (SIGHUP to its primary: settings re-read, web workers replaced)
                     and say how it ended: applied (what changed) or refused (why), waiting as
                     long as replacing the web workers may take (PID: as for throttled)`,
  needs: 'settings',
  run: (args, context) => reloadPrimary(context, args),
};

/** How long the primary may take to record that it read the settings again. */
const RELOAD_ANSWER_MS = 10_000;

async function reloadPrimary(context: CommandContext, args: string[]): Promise<number> {
  const { config, stdout } = context;
  const pid = optionOf(args, '--pid');
  if (pid !== undefined && !/^[1-9]\d*$/.test(pid)) return fail("reload --pid needs the primary's process id");
  const running = pid === undefined ? runningInstance(config) : undefined;
  const target = pid === undefined ? running?.pid : Number(pid);
  if (target === undefined) return notRunning(config);
  if (running && !running.recordsReloads) {
    await signalPrimary(context, 'SIGHUP');
    return say('a primary of an earlier release records no outcome: its log says how the reload ends');
  }
  const before = Math.max(0, ...readReloads(config, target).map((record) => record.seq));
  if (!signalled(target, 'SIGHUP')) return fail(`no process ${target}`);
  const ours = await waitForReload(config, target, (record) => record.seq > before, RELOAD_ANSWER_MS);
  if (!ours) return fail(`Paceline's primary (PID ${target}) did not answer the reload within 10 s`);
  // A host with no web worker (ROLE=jobs) ends its reload at once, yet may record it a moment later.
  const withinMs = Math.max(ours.withinMs, RELOAD_ANSWER_MS);
  if (ours.state === 'replacing')
    stdout.write(
      `reloading: ${changes(ours)}; replacing ${ours.web} web worker(s) one at a time ` +
        `(waiting up to ${Math.ceil(withinMs / 1000)} s)\n`,
    );
  const ended = await waitForReload(config, target, (r) => r.seq === ours.seq && r.state !== 'replacing', withinMs);
  if (!ended)
    return fail(
      `no outcome within ${Math.ceil(withinMs / 1000)} s: the reload is still under way; the service's ` +
        "log says how it ends ('web workers replaced')",
    );
  if (ended.state === 'refused') return fail(`reload refused, the workers keep their settings: ${ended.reason}`);
  if (ended.state === 'abandoned') return fail(`reload abandoned: ${ended.reason}`);
  const seconds = ((ended.endedAt ?? Date.now()) - ended.startedAt) / 1000;
  stdout.write(`reload applied in ${seconds.toFixed(1)} s: ${changes(ended)}; ${ended.web} web worker(s) replaced\n`);
  return 0;
}

/** The record `wanted` picks among those primary `pid` keeps, read every 100 ms for up to `withinMs`. */
async function waitForReload(
  config: Config,
  pid: number,
  wanted: (record: ReloadRecord) => boolean,
  withinMs: number,
): Promise<ReloadRecord | undefined> {
  for (const deadline = Date.now() + withinMs; ; await new Promise((done) => setTimeout(done, 100))) {
    const found = readReloads(config, pid).find(wanted);
    if (found || Date.now() > deadline) return found;
  }
}

const changes = (record: ReloadRecord) =>
  record.changed.length > 0 ? record.changed.join(', ') : 'no setting changed';

/** Sends `signal` to `pid`; false when there is no such process. */
function signalled(pid: number, signal: NodeJS.Signals): boolean {
  try {
    return process.kill(pid, signal);
  } catch {
    return false;
  }
}

function optionOf(args: string[], name: string): string | undefined {
  return args.includes(name) ? (args[args.indexOf(name) + 1] ?? '') : undefined;
}

async function signalPrimary(context: CommandContext, signal: NodeJS.Signals): Promise<number> {
  const running = runningInstance(context.config);
  if (!running) return notRunning(context.config);
  process.kill(running.pid, signal);
  process.stdout.write(`sent ${signal} to Paceline's primary (PID ${running.pid})\n`);
  return 0;
}

function notRunning(config: Config): number {
  process.stdout.write(`Paceline is not running on DATA_DIR ${resolve(config.DATA_DIR)}\n`);
  return 3;
}

/**
 * `throttled [--scope S] [--pid PID]`: asks the running primary (THROTTLED_SIGNAL) and prints its
 * answer, waiting up to 10 s, each client with its plan and override from the database. PID names a
 * primary that does not record itself under DATA_DIR (one started with both DATABASE_URL and
 * REDIS_URL); it writes its answer under its own DATA_DIR.
 */
export const throttled: Command = {
  usage: `  throttled [--scope S] [--pid PID]
                     its heaviest refused clients per scope over THROTTLE_TOP_WINDOW, with
                     their addresses or user ids, the pseudonyms the metrics show, a user's
                     plan and the override in force for the client (PID: a primary with
                     DATABASE_URL and REDIS_URL, which records no DATA_DIR PID)`,
  needs: 'settings',
  run: (args, context) => printThrottled(context, args),
};

async function printThrottled(context: CommandContext, args: string[]): Promise<number> {
  const { config } = context;
  const scope = optionOf(args, '--scope');
  const pid = optionOf(args, '--pid');
  if (scope === '') return fail('throttled --scope needs a scope name');
  if (pid !== undefined && !/^[1-9]\d*$/.test(pid)) return fail("throttled --pid needs the primary's process id");
  const running = pid === undefined ? runningInstance(config) : undefined;
  const target = pid === undefined ? running?.pid : Number(pid);
  if (target === undefined) return fail(`Paceline is not running on DATA_DIR ${resolve(config.DATA_DIR)}`);
  if (config.THROTTLE_WATCH === 'off') return fail('THROTTLE_WATCH=off: Paceline keeps no throttled clients to show');
  // The signal's default action ends a process: a primary of an older release would stop.
  if (running && !running.answers?.includes(THROTTLED_SIGNAL))
    return fail(`Paceline's primary (PID ${target}) is of a release without the throttled command: restart it first`);
  const since = Date.now();
  process.kill(target, THROTTLED_SIGNAL);
  for (let tries = 0; tries < 100; tries++) {
    const answer = takeThrottledAnswer(config, since);
    if (answer) return printAnswer(context, answer, scope, running);
    await new Promise((done) => setTimeout(done, 100));
  }
  return fail(`Paceline's primary (PID ${target}) did not answer within 10 s`);
}

/**
 * The primary's answer, each client with its plan and override read from the database (docs/throttling.md "Find
 * them"); without them, and one line that says so, when the database cannot be read.
 */
async function printAnswer(
  context: CommandContext,
  answer: ThrottledAnswer,
  scope: string | undefined,
  running: Instance | undefined,
): Promise<number> {
  const anyClient = scopesShown(answer, scope).some((top) => top.clients.length > 0);
  const embeddedRuns = running?.ports.EMBEDDED_PG_PORT !== undefined;
  const limits = anyClient ? await readClientLimits(context.config, context.withDatabase, embeddedRuns) : undefined;
  process.stdout.write(formatThrottled(answer, scope, limits?.ok ? limits.describe : undefined));
  if (limits?.ok === false) say(limits.line);
  return 0;
}
