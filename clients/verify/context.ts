import { randomBytes } from 'node:crypto';
import type { CheckName, Credentials, Options } from './args.js';
import { Client } from './client.js';
import { History } from './history.js';

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

  constructor(readonly options: Options) {
    this.history = new History(options.historyFile);
  }

  /** A client of its own (keep-alive connections, recorded under `name`). */
  client(name: string, options: { sockets?: number; localAddress?: string; token?: string } = {}): Client {
    const client = new Client(this.options.base, name, this.history, options);
    client.token = options.token;
    this.clients.push(client);
    return client;
  }

  /** Logs `user` in at `/api/auth/token/`, honouring `Retry-After`; throws a one-line Error if refused. */
  async logIn(user: Credentials, name: string): Promise<string> {
    const client = this.client(`${name}-login`);
    const answer = await client.sendPolitely({ method: 'POST', path: 'api/auth/token/', body: user, f: 'login' });
    const token = (answer.body as { token?: unknown } | undefined)?.token;
    if (answer.status !== 200 || typeof token !== 'string') {
      throw new Error(
        `logging in as ${user.username} answered ${answer.status ?? answer.error}: ${JSON.stringify(answer.body)}`,
      );
    }
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

/** Runs `work` on `count` concurrent loops until each returns false or the deadline passes. */
export async function loops(count: number, deadline: number, work: (loop: number) => Promise<boolean>): Promise<void> {
  await Promise.all(
    Array.from({ length: count }, async (_, loop) => {
      while (Date.now() < deadline && (await work(loop)));
    }),
  );
}
