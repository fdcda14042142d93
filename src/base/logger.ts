import { createRequire } from 'node:module';
import pino, { type DestinationStream, type Logger } from 'pino';
import type PinoPretty from 'pino-pretty';
import type { Config } from '../settings/config.js';
import { lineBufferFor } from './log-destination.js';

/**
 * One logger per process, tagged with the process role: JSON lines on stdout, or pino-pretty's
 * readable lines when stdout is a terminal (`pretty`, by default when it is one; docs/operations.md
 * "Logs"). JSON lines are gathered over a turn of the event loop and written together at its end,
 * and at exit (docs/architecture.md "Observability").
 */
export function createLogger(config: Pick<Config, 'LOG_LEVEL'>, role: string, pretty = writesToTerminal()): Logger {
  const options = {
    level: config.LOG_LEVEL,
    base: { pid: process.pid, role },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return pino(options, pretty ? readableLines() : lineBufferFor(1));
}

/** Whether stdout is a terminal, where a person reads it; the children share the primary's. */
function writesToTerminal(): boolean {
  return process.stdout.isTTY === true;
}

/**
 * pino-pretty writing one line per record to `destination` (stdout by default), before `log()`
 * returns, so a process's last lines are out when it exits: `[12:00:01] INFO (4242): web request
 * {"method":"GET",…}`. Colours follow the terminal, and NO_COLOR or FORCE_COLOR=0 turn them off.
 */
export function readableLines(destination: number | NodeJS.WritableStream = 1): DestinationStream {
  return loadPretty()({
    destination,
    sync: true,
    singleLine: true,
    translateTime: 'SYS:HH:MM:ss',
    ignore: 'hostname,role',
    messageFormat: '{role} {msg}',
  });
}

/**
 * Loaded on a terminal only: the processes that log JSON (containers, systemd, pipes) do without
 * its twenty-odd milliseconds at each start.
 */
function loadPretty(): typeof PinoPretty {
  return createRequire(import.meta.url)('pino-pretty') as typeof PinoPretty;
}

/**
 * A message for whoever started the service, such as the ready banner: its `lines` as plain text
 * when stdout is a terminal, else one log line of `level` carrying `fields`, as every other line.
 */
export function announce(
  logger: Logger,
  level: 'info' | 'warn',
  fields: Record<string, unknown>,
  lines: readonly string[],
  terminal = writesToTerminal(),
): void {
  if (terminal) process.stdout.write(`${lines.join('\n')}\n`);
  else logger[level](fields, lines.join(' ; '));
}
