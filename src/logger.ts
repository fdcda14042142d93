import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.js';
import { lineBufferFor } from './log-destination.js';

/**
 * One logger per process, tagged with the process role: JSON lines on stdout, or short
 * human-readable lines when stdout is a terminal (`pretty`, by default when it is one). JSON
 * lines are gathered over a turn of the event loop and written together at its end, and at exit
 * (docs/architecture.md "Observability").
 */
export function createLogger(
  config: Pick<Config, 'LOG_LEVEL'>,
  role: string,
  pretty = process.stdout.isTTY === true,
): Logger {
  const options = {
    level: config.LOG_LEVEL,
    base: { pid: process.pid, role },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  return pino(options, pretty ? prettyDestination(process.stdout) : lineBufferFor(1));
}

const LEVELS: Readonly<Record<number, string>> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
const OMITTED: ReadonlySet<string> = new Set(['level', 'time', 'pid', 'role', 'msg', 'hostname']);

/** `12:00:01 INFO  web#4242 request method=GET route=/api/tasks/ status=200 ms=3.1`, from one pino JSON line. */
export function formatLine(json: string): string {
  let record: Record<string, unknown>;
  try {
    record = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time = typeof record.time === 'string' ? record.time.slice(11, 19) : '';
  const level = (LEVELS[Number(record.level)] ?? String(record.level)).padEnd(5);
  const rest = Object.entries(record)
    .filter(([key]) => !OMITTED.has(key))
    .map(([key, value]) => formatField(key, value));
  const head = `${time} ${level} ${String(record.role ?? '')}#${String(record.pid ?? '')} ${String(record.msg ?? '')}`;
  return [head, ...rest].join(' ') + '\n';
}

function formatField(key: string, value: unknown): string {
  if (key === 'err' && value && typeof value === 'object' && 'stack' in value)
    return `\n${String((value as { stack: unknown }).stack)}`;
  return `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`;
}

function prettyDestination(out: NodeJS.WritableStream): DestinationStream {
  return { write: (line: string) => void out.write(formatLine(line.trimEnd())) };
}
