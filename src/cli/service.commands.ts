import { resolve } from 'node:path';
import { describeInstance, runningInstance } from '../cluster/instance-file.js';
import { formatThrottled, takeThrottledAnswer, THROTTLED_SIGNAL } from '../cluster/throttled-file.js';
import type { Config } from '../settings/config.js';
import type { Command, CommandContext } from './command.js';
import { fail } from './output.js';
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

/** `reload`: SIGHUP to the primary recorded under DATA_DIR (exit 3 when none runs). */
export const reload: Command = {
  usage: `  reload             reload it (SIGHUP to its primary: settings re-read, web workers replaced)`,
  needs: 'settings',
  run: (_args, context) => signalPrimary(context, 'SIGHUP'),
};

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
 * answer, waiting up to 10 s. PID names a primary that does not record itself under DATA_DIR (one
 * started with both DATABASE_URL and REDIS_URL); it writes its answer under its own DATA_DIR.
 */
export const throttled: Command = {
  usage: `  throttled [--scope S] [--pid PID]
                     its heaviest refused clients per scope over THROTTLE_TOP_WINDOW, with
                     their addresses or user ids and the pseudonyms the metrics show (PID:
                     a primary with DATABASE_URL and REDIS_URL, which records no DATA_DIR PID)`,
  needs: 'settings',
  run: (args, context) => printThrottled(context.config, args),
};

async function printThrottled(config: Config, args: string[]): Promise<number> {
  const option = (name: string) => (args.includes(name) ? (args[args.indexOf(name) + 1] ?? '') : undefined);
  const scope = option('--scope');
  const pid = option('--pid');
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
    if (answer) {
      process.stdout.write(formatThrottled(answer, scope));
      return 0;
    }
    await new Promise((done) => setTimeout(done, 100));
  }
  return fail(`Paceline's primary (PID ${target}) did not answer within 10 s`);
}
