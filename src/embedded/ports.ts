import { createServer } from 'node:net';

/**
 * Asks the kernel for a port that is free on 127.0.0.1 right now. Another process may take it
 * before the caller binds it, which is acceptable for tests and development.
 */
export async function findFreePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('could not read a free port');
  return address.port;
}

/**
 * `count` distinct ports free on 127.0.0.1 right now: each is held until all are chosen, so the
 * kernel cannot hand the same one out twice (as separate findFreePort calls may).
 */
export async function findFreePorts(count: number): Promise<number[]> {
  const servers = Array.from({ length: count }, () => createServer());
  try {
    await Promise.all(
      servers.map(
        (server) =>
          new Promise<void>((resolve, reject) => {
            server.once('error', reject);
            server.listen(0, '127.0.0.1', resolve);
          }),
      ),
    );
    return servers.map((server) => {
      const address = server.address();
      if (address === null || typeof address === 'string') throw new Error('could not read a free port');
      return address.port;
    });
  } finally {
    await Promise.all(servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
  }
}
