import type { Context } from 'koa';
import { AppError, Errors } from '../base/errors.js';

/** How much of an oversize body, in multiples of the limit, is read and dropped before cutting the client off. */
const DISCARD_FACTOR = 16;

/**
 * Reads a JSON request body as DRF's JSON parser would: an empty body is `{}`; any media type
 * other than `application/json` or `*+json` (a form, or no Content-Type at all), a charset other
 * than UTF-8 or a content coding is 415; a body over `limit` bytes is 413, its rest dropped
 * unparsed; malformed JSON is 400 with the parser's reason. Forms are refused rather than parsed:
 * `curl -d '{"title": "x"}'` sends JSON labelled as a form, which would otherwise be read as one
 * field named after the whole document and answered "This field is required.".
 */
export async function readBody(ctx: Context, limit: number): Promise<unknown> {
  const declared = Number(ctx.get('Content-Length') || 0);
  if (declared > limit) {
    discardRest(ctx, limit);
    throw Errors.payloadTooLarge(limit);
  }
  const bytes = await readRaw(ctx, limit);
  if (bytes.length === 0) return {};
  const encoding = ctx.get('Content-Encoding').trim().toLowerCase();
  if (encoding && encoding !== 'identity')
    throw Errors.unsupportedMediaType(`Unsupported content coding "${encoding}" in request.`);
  const [mediaType = '', ...parameters] = ctx.get('Content-Type').split(';');
  const charset = parameters
    .map((p) => /^\s*charset\s*=\s*"?([^";\s]*)"?\s*$/i.exec(p)?.[1]?.toLowerCase())
    .find(Boolean);
  if (charset && charset !== 'utf-8' && charset !== 'utf8' && charset !== 'us-ascii') {
    throw Errors.unsupportedMediaType(`Unsupported charset "${charset}" in request: bodies are read as UTF-8.`);
  }
  const type = mediaType.trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json')) return parseJson(decodeUtf8(bytes));
  // DRF names what it got, an empty type included (`""`); ours keeps its text and says why.
  const missing = type === '' ? ' The request has no Content-Type.' : '';
  throw Errors.unsupportedMediaType(`Unsupported media type "${type}" in request.${missing} ${EXPECTED}`);
}

/** What every 415 for a media type adds to DRF's text. */
export const EXPECTED = 'Send the body as JSON with Content-Type: application/json.';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/** A lone UTF-16 surrogate: JSON allows it as an escape, PostgreSQL text and jsonb do not. */
const LONE_SURROGATE = /\p{Surrogate}/u;

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw, (key, value: unknown) => {
      if (LONE_SURROGATE.test(key) || (typeof value === 'string' && LONE_SURROGATE.test(value))) {
        throw new SyntaxError('a string holds an unpaired surrogate (not valid Unicode)');
      }
      return value;
    });
  } catch (error) {
    // A RangeError is the parser running out of stack on deep nesting, not a message for clients.
    if (error instanceof RangeError) throw Errors.invalidJson('the document is nested too deeply');
    throw Errors.invalidJson(error instanceof Error ? error.message : 'invalid JSON');
  }
}

async function readRaw(ctx: Context, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    // Leaving the loop early must not destroy the request: that resets the socket under the 413.
    for await (const chunk of ctx.req.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > limit) {
        discardRest(ctx, limit);
        throw Errors.payloadTooLarge(limit);
      }
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof AppError) throw error;
    // The client went away mid-body, or Node cut it off (HTTP_REQUEST_TIMEOUT_MS, malformed
    // chunks): the client's failure, logged and counted as such, never as the database's 503.
    throw Errors.badRequest('The request body was not received in full.');
  }
  return Buffer.concat(chunks);
}

function decodeUtf8(bytes: Buffer): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw Errors.invalidJson('the body is not valid UTF-8');
  }
}

/**
 * Drops the rest of an oversize body so that the client, still sending, can read the 413 (a
 * socket closed with unread input is reset). A client that keeps sending beyond a few times the
 * limit is cut off.
 */
function discardRest(ctx: Context, limit: number): void {
  let dropped = 0;
  ctx.req.on('data', (chunk: Buffer) => {
    dropped += chunk.length;
    if (dropped > DISCARD_FACTOR * limit) ctx.req.socket.destroy();
  });
  ctx.req.resume();
}
