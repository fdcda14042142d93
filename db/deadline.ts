import type pg from 'pg';

/**
 * A query the server did not answer within the connection's answer deadline: the connection was
 * destroyed under it (docs/architecture.md "Bounded work"). `inDoubt` when that query was a COMMIT: the server
 * may still commit once it answers again, so the write's outcome is unknown; any other statement
 * leaves a transaction that can no longer commit, so nothing of it was written.
 */
export class DatabaseDeadlineError extends Error {
  override name = 'DatabaseDeadlineError';
  constructor(
    readonly deadlineMs: number,
    readonly inDoubt: boolean,
  ) {
    super(`the database did not answer within ${deadlineMs} ms${inDoubt ? ' (a COMMIT was in flight)' : ''}`);
  }
}

type Query = (...args: unknown[]) => unknown;

/**
 * Gives every query of `client` at most `deadlineMs` to be answered. `statement_timeout` ends a
 * statement the server runs too long, but not one it never gets to: a server that is frozen, or
 * cut off without a reset, answers nothing. Past the deadline the connection is ended at once
 * (`client.end()`), the query fails with DatabaseDeadlineError, every later query on this client
 * fails with the same error (so a ROLLBACK that follows does not hide it), and the pool drops the
 * connection on release (an ended client is never reused).
 */
export function boundAnswers(client: pg.PoolClient, deadlineMs: number): void {
  const query = client.query.bind(client) as Query;
  let expired: DatabaseDeadlineError | undefined;
  const bounded: Query = (...args) => {
    if (expired) return Promise.reject(expired);
    const result = query(...args);
    // pg's callback and submittable forms are not used here; they keep pg's own behaviour.
    if (!(result instanceof Promise)) return result;
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: unknown } | undefined)?.text;
    let fired: DatabaseDeadlineError | undefined;
    const timer = setTimeout(() => {
      fired = expired = new DatabaseDeadlineError(deadlineMs, typeof text === 'string' && /^\s*commit\b/i.test(text));
      // With a query in flight, pg's end() destroys the socket rather than wait for the server
      // (a hung query would block a graceful end forever); the query then fails at once. Not
      // awaited: its promise settles when the socket has closed, and never rejects.
      void client.end();
    }, deadlineMs);
    return result.then(
      (value: unknown) => {
        clearTimeout(timer);
        return value;
      },
      (error: unknown) => {
        clearTimeout(timer);
        throw fired ?? error;
      },
    );
  };
  client.query = bounded as typeof client.query;
}
