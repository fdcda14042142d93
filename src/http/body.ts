import type { Context } from 'koa';
import { Errors } from '../errors.js';

/**
 * Reads a JSON (or, where `allowForm`, form-encoded) request body as DRF's parsers would: an
 * empty body is `{}`; a wrong Content-Type is 415; a body over `limit` bytes is 413 without
 * reading the rest; malformed JSON is 400 with the parser's reason.
 */
export async function readBody(ctx: Context, limit: number, allowForm = false): Promise<unknown> {
  const declared = Number(ctx.get('Content-Length') || 0);
  if (declared > limit) throw Errors.payloadTooLarge(limit);
  const raw = await readRaw(ctx, limit);
  if (raw.length === 0) return {};
  const type = (ctx.get('Content-Type').split(';')[0] ?? '').trim().toLowerCase();
  if (type === 'application/json' || type.endsWith('+json')) return parseJson(raw);
  if (allowForm && type === 'application/x-www-form-urlencoded') return Object.fromEntries(new URLSearchParams(raw));
  throw Errors.unsupportedMediaType(type || 'none');
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch (error) {
    throw Errors.invalidJson(error instanceof Error ? error.message : 'invalid JSON');
  }
}

async function readRaw(ctx: Context, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      ctx.req.destroy();
      throw Errors.payloadTooLarge(limit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}
