import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../settings/config.js';
import type { HostTop } from './top-clients-merge.js';

/** Where the primary answers `cli throttled`: real identities, so readable by its own account only, and removed once read. */
const THROTTLED_FILE = 'throttled.json';
/** The signal by which `cli throttled` asks the running primary for its heaviest refused clients. */
export const THROTTLED_SIGNAL = 'SIGUSR2';

export interface ThrottledAnswer {
  writtenAt: number;
  scopes: HostTop[];
}

function throttledFilePath(config: Pick<Config, 'DATA_DIR'>): string {
  return join(resolve(config.DATA_DIR), THROTTLED_FILE);
}

/**
 * On THROTTLED_SIGNAL the primary asks every child for its report and writes the host's top
 * clients per scope, with their real identities, to DATA_DIR/throttled.json (docs/throttling.md
 * "Find them"). A file under DATA_DIR rather than a port: nothing a network peer can reach ever
 * names a client.
 */
export function answerThrottledOnSignal(
  config: Pick<Config, 'DATA_DIR'>,
  logger: Logger,
  hub: { refresh(): Promise<void>; topClients(): HostTop[] },
): void {
  process.on(THROTTLED_SIGNAL, () => {
    void (async () => {
      await hub.refresh();
      const path = throttledFilePath(config);
      const answer: ThrottledAnswer = { writtenAt: Date.now(), scopes: hub.topClients() };
      writeFileSync(`${path}.tmp`, `${JSON.stringify(answer)}\n`, { mode: 0o600 });
      renameSync(`${path}.tmp`, path);
    })().catch((error: unknown) => logger.error({ err: error }, 'could not write the throttled clients'));
  });
}

/** The answer written at or after `since`, removed as it is read; undefined while there is none. */
export function takeThrottledAnswer(config: Pick<Config, 'DATA_DIR'>, since: number): ThrottledAnswer | undefined {
  const path = throttledFilePath(config);
  try {
    const answer = JSON.parse(readFileSync(path, 'utf8')) as ThrottledAnswer;
    if (answer.writtenAt < since) return undefined;
    rmSync(path, { force: true });
    return answer;
  } catch {
    return undefined;
  }
}

/** The scopes of the answer the CLI prints: all, or the one `scope` names. */
export function scopesShown(answer: ThrottledAnswer, scope?: string): HostTop[] {
  return answer.scopes.filter((top) => scope === undefined || top.scope === scope);
}

/**
 * The answer as the CLI prints it: one line per client, heaviest first, per scope; `about` gives what follows a
 * client's line (its plan and override, docs/throttling.md "Find them"), none when undefined.
 */
export function formatThrottled(answer: ThrottledAnswer, scope?: string, about?: (ident: string) => string): string {
  const scopes = scopesShown(answer, scope);
  if (scopes.length === 0) return `no refused clients${scope ? ` in scope ${scope}` : ''} in the window\n`;
  const lines: string[] = [];
  for (const top of scopes) {
    lines.push(`${top.scope}: ${top.total} refused in the window`);
    for (const { ident, client, count, error } of top.clients) {
      const line = `  ${String(count).padStart(8)}${error > 0 ? ` (±${error})` : ''}  ${ident}  ${client}`;
      lines.push(about ? `${line}  ${about(ident)}` : line);
    }
  }
  return `${lines.join('\n')}\n`;
}
