import type { Client } from '../client.js';
import type { RunContext } from '../context.js';
import type { Element } from './cursor-analysis.js';

/**
 * The tasks a run creates, as elements with their acknowledged times: every task carries the run id in its
 * title, and only these are ever changed or deleted (docs/verify.md "Against staging, safely").
 */
export class Tasks {
  readonly elements = new Map<number, Element>();
  readonly titles = new Map<number, string>();
  private readonly client: Client;

  constructor(
    private readonly ctx: RunContext,
    readonly token: string,
    name: string,
  ) {
    this.client = ctx.client(name, { token, sockets: 2 });
  }

  /** Creates a task; its id, or undefined when the service did not acknowledge it. */
  async create(label: string, headers?: Record<string, string>): Promise<number | undefined> {
    const title = this.ctx.title(label);
    const op = await this.client.sendPolitely({
      method: 'POST',
      path: 'api/tasks/',
      body: { title },
      headers,
      f: 'create',
    });
    const id = (op.body as { id?: unknown } | undefined)?.id;
    if (op.status !== 201 || typeof id !== 'number') return undefined;
    this.elements.set(id, { id, createInvoke: op.invoke, createAck: op.complete });
    this.titles.set(id, title);
    return id;
  }

  /** Deletes one of the run's tasks (no-op for any other id); true when acknowledged. */
  async deleteOne(id: number): Promise<boolean> {
    const element = this.elements.get(id);
    if (element === undefined || element.deleteInvoke !== undefined) return false;
    const op = await this.client.sendPolitely({ method: 'DELETE', path: `api/tasks/${id}/`, f: 'delete' });
    element.deleteInvoke = op.invoke;
    if (op.status === 204 || op.status === 404) element.deleteAck = op.complete;
    return element.deleteAck !== undefined;
  }

  /** A task of the run not yet deleted, chosen at random (0 when there is none). */
  randomLive(): number {
    const live = [...this.elements.values()].filter((e) => e.deleteInvoke === undefined);
    return live[Math.floor(Math.random() * live.length)]?.id ?? 0;
  }

  /** Deletes every task of the run still standing, including ones made by checks outside this registry. */
  async cleanUp(extra: Iterable<number> = []): Promise<number> {
    let deleted = 0;
    for (const id of extra) {
      if (!this.elements.has(id)) this.elements.set(id, { id, createInvoke: 0, createAck: 0 });
    }
    for (const element of this.elements.values()) {
      if (element.deleteInvoke === undefined && (await this.deleteOne(element.id))) deleted++;
    }
    return deleted;
  }
}
