import pino, { type Logger } from 'pino';
import type { Config } from './config.js';

/** JSON lines on stdout, one logger per process, tagged with the process role. */
export function createLogger(config: Pick<Config, 'LOG_LEVEL'>, role: string): Logger {
  return pino({ level: config.LOG_LEVEL, base: { pid: process.pid, role }, timestamp: pino.stdTimeFunctions.isoTime });
}
