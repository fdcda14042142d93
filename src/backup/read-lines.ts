import type { Readable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { createGunzip } from 'node:zlib';

/** A compressed file that cannot be read to its end: not gzip, or cut short. */
export class DamagedFileError extends Error {}

/**
 * The lines of a gzip-compressed stream, split on `\n` only (a row line holds no other line
 * break), without their ending; a last line with no `\n` is yielded too. Memory holds one chunk
 * and one line. A stream that is not gzip, or ends in the middle of its compressed data, throws
 * DamagedFileError naming zlib's reason. Ending the iteration early closes `source`.
 */
export async function* readGzipLines(source: Readable): AsyncGenerator<string> {
  const gunzip = createGunzip();
  source.on('error', (error) => gunzip.destroy(error));
  source.pipe(gunzip);
  const decoder = new StringDecoder('utf8');
  let rest = '';
  try {
    for await (const chunk of gunzip as AsyncIterable<Buffer>) {
      const text = rest + decoder.write(chunk);
      const lines = text.split('\n');
      rest = lines.pop()!;
      yield* lines;
    }
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    if (e.code?.startsWith('Z_')) throw new DamagedFileError(e.message);
    throw error;
  } finally {
    source.unpipe(gunzip);
    gunzip.destroy();
    source.destroy();
  }
  rest += decoder.end();
  if (rest !== '') yield rest;
}
