import { randomBytes } from 'node:crypto';
import type { CheckName, Credentials, Options } from './args.js';
import { Client } from './client.js';
import { History, type Operation } from './history.js';
import { confirmIdentity } from './identity.js';
import { Stop } from './stop.js';

export type Verdict = 'holds' | 'violated' | 'skipped';

/** A check's answer: a plain verdict, one sentence, the evidence, and what to plot in the HTML report. */
export interface CheckResult {
  name: CheckName;
  verdict: Verdict;
  summary: string;
  evidence: Record<string, unknown>;
  requests: number;
  seconds: number;
  plot?: Plot;
}

/** A line or bar plot the HTML report draws as SVG. */
export interface Plot {
  title: string;
  kind: 'line' | 'bars';
  xLabel: string;
  yLabel: string;
  series: { name: string; points: [number, number][] }[];
  /** Names of the bars (x = 1, 2, …), where numbers would say less. */
  xLabels?: string[];
  /** A horizontal line, such as the limit. */
  level?: { name: string; y: number };
}

/** What every check gets: the service, the history, the run's id and the test users' clients. */
export class RunContext {
  readonly runId = `vr-${randomBytes(4).toString('hex')}`;
  readonly history: History;
  private readonly clients: Client[] = [];
  /**
   * When each token, and this host's address without one, was first used: a limiter whose window opens at an
   * identity's first hit opens it then, and the limits check aims its bursts at that window's edge.
   */
  readonly firstUse = new Map<string, number>();
  /**
   * How the service showed it takes each token as its user, and every request the identity check sent with the
   * token (docs/verify.md "Identity is checked"): the limits check counts those it must measure a limit after.
   */
  readonly recognised = new Map<string, { by: string; sent: Operation[] }>();

  constructor(readonly options: Options) {
    this.history = new History(options.historyFile);
  }

  /** A client of its own (keep-alive connections, recorded under `name`). */
  client(
    name: string,
    options: { sockets?: number; localAddress?: string; token?: string; keep?: boolean } = {},
  ): Client {
    const client = new Client(this.options.base, name, this.history, { ...options, scheme: this.options.authScheme });
    client.token = options.token;
    this.clients.push(client);
    return client;
  }

  /**
   * Logs `user` in at `/api/auth/token/` (honouring `Retry-After`) and confirms the service takes the token
   * as that user; anything else is a `Stop` with one line (docs/verify.md "Exit status").
   */
  async logIn(user: Credentials, name: string): Promise<string> {
    const client = this.client(`${name}-login`);
    const answer = await client.sendPolitely({ method: 'POST', path: 'api/auth/token/', body: user, f: 'login' });
    const token = (answer.body as { token?: unknown } | undefined)?.token;
    if (answer.error !== undefined) throw new Stop(`logging in as ${user.username}: no answer (${answer.error})`);
    if (answer.status === 404 || answer.status === 405) {
      throw new Stop(
        `the service has no login at POST /api/auth/token/ (${answer.status}): check its limits with --anonymous`,
      );
    }
    if (answer.status !== 200 || typeof token !== 'string')
      throw new Stop(`logging in as ${user.username} was refused: ${answer.status} ${brief(answer.body)}`);
    const now = Date.now();
    this.firstUse.set(token, now);
    if (!this.firstUse.has(ANONYMOUS)) this.firstUse.set(ANONYMOUS, now);
    const withToken = this.client(`${name}-identity`, { token, keep: true });
    const by = await confirmIdentity(
      { withToken, without: this.client(`${name}-anonymous`) },
      {
        username: user.username,
        scheme: this.options.authScheme,
        limitsPath: this.options.path,
        identityPath: this.options.identityPath,
        rate: this.options.rate,
      },
    );
    this.recognised.set(token, { by, sent: withToken.sent });
    return token;
  }

  /** A title that marks a task as this run's own (docs/verify.md "Against staging, safely"). */
  title(label: string): string {
    return `verify ${this.runId} ${label}`;
  }

  close(): void {
    for (const client of this.clients) client.close();
  }
}

/** The key of {@link RunContext.firstUse} for requests sent without a token from the default address. */
export const ANONYMOUS = '';

/** An answer's body in at most 120 characters, for a one-line message. */
function brief(body: unknown): string {
  const text = typeof body === 'string' ? body : (JSON.stringify(body) ?? '(no body)');
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

/** Runs `work` on `count` concurrent loops until each returns false or the deadline passes. */
export async function loops(count: number, deadline: number, work: (loop: number) => Promise<boolean>): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, async (_, loop) => {
      while (Date.now() < deadline && (await work(loop)));
    }),
  );
}
