import { connect, createServer, type Server, type Socket } from 'node:net';

/** A TCP relay on loopback to a server, whose traffic can be delayed, or held and let go. */
export interface TcpRelay {
  port: number;
  /** `url` with the relay in place of its host and port. */
  through(url: string): string;
  /** Stops bytes in both directions; connections stay open, as with a stopped server. */
  freeze(): void;
  thaw(): void;
  /** Stops the server's bytes only (its replies wait in the relay), and lets them go. */
  holdReplies(): void;
  releaseReplies(): void;
  close(): Promise<void>;
}

export interface TcpRelayOptions {
  /** Delays every chunk each way. */
  delayMs?: number;
  /** Sees every chunk a client sends, as it arrives. */
  onClientChunk?: (chunk: Buffer) => void;
}

/** Starts a relay to `target` (a URL with host and port). */
export async function startTcpRelay(target: string, options: TcpRelayOptions = {}): Promise<TcpRelay> {
  const { hostname, port: targetPort } = new URL(target);
  const sockets = new Set<Socket>();
  const upstreams = new Set<Socket>();
  let frozen = false;
  let holding = false;
  const server: Server = createServer((client) => {
    const upstream = connect(Number(targetPort), hostname);
    upstreams.add(upstream);
    upstream.on('close', () => upstreams.delete(upstream));
    if (holding) upstream.pause();
    if (options.onClientChunk) client.on('data', options.onClientChunk);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('error', () => to.destroy());
      from.on('close', () => {
        sockets.delete(from);
        to.destroy();
      });
      from.on('data', (chunk) =>
        options.delayMs ? void setTimeout(() => to.write(chunk), options.delayMs) : to.write(chunk),
      );
      if (frozen) from.pause();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    through(url) {
      const relayed = new URL(url);
      relayed.hostname = '127.0.0.1';
      relayed.port = String(port);
      return relayed.toString();
    },
    freeze() {
      frozen = true;
      for (const socket of sockets) socket.pause();
    },
    thaw() {
      frozen = false;
      for (const socket of sockets) socket.resume();
    },
    holdReplies() {
      holding = true;
      for (const socket of upstreams) socket.pause();
    },
    releaseReplies() {
      holding = false;
      for (const socket of upstreams) socket.resume();
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
