import { access, constants, mkdir } from 'node:fs/promises';
import net from 'node:net';
import { dirname, resolve } from 'node:path';
import { Stop } from './stop.js';

/** `--report DIR` must be a folder it can write before a single request is spent. */
export async function prepareReportDir(dir: string | undefined): Promise<void> {
  if (dir === undefined) return;
  try {
    await makeFolders(resolve(dir));
    await access(dir, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new Stop(`--report ${dir}: cannot write a folder there (${code ?? (error as Error).message})`);
  }
}

/** Something must accept a TCP connection at the base URL's host and port (no HTTP request is spent). */
export async function reach(base: URL, timeoutMs = 5_000): Promise<void> {
  const port = Number(base.port || (base.protocol === 'https:' ? 443 : 80));
  const host = base.hostname.replace(/^\[|\]$/g, '');
  const failure = await new Promise<string | undefined>((resolve) => {
    const socket = net.connect({ host, port });
    const done = (why?: string) => {
      socket.destroy();
      resolve(why);
    };
    socket.setTimeout(timeoutMs, () => done(`no connection within ${timeoutMs} ms`));
    socket.once('connect', () => done());
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code ?? error.message));
  });
  if (failure !== undefined) throw new Stop(`nothing answers at ${base.href} (${failure})`);
}

/**
 * `mkdir -p`, one level at a time: Node's recursive mkdir never returns where a folder cannot be made under
 * one that exists (as under /proc), and a stuck command is worse than a one-line refusal.
 */
async function makeFolders(dir: string): Promise<void> {
  try {
    await mkdir(dir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    if (code !== 'ENOENT' || dirname(dir) === dir) throw error;
    await makeFolders(dirname(dir));
    await mkdir(dir);
  }
}
