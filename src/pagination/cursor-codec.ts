import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Ordering } from './types.js';

/** Where a cursor page starts: strictly after `key` (forward) or strictly before it (backward). */
export interface CursorPosition {
  key: number;
  direction: 'forward' | 'backward';
}

/**
 * What a cursor is only valid for: the list it came from (its path: one task's history is not
 * another's), the list's ordering and the `ordering` value the client sent.
 */
export interface CursorBinding {
  list: string;
  ordering: Ordering;
  orderingParam: string;
}

// Token = base64url(payload ‖ mac), no padding. Payload: version (1 byte), flags (1 byte: bit 0
// backward, bit 1 descending), key (signed 64-bit big-endian), orderingParam (UTF-8, the rest).
// mac = the first 16 bytes of HMAC-SHA256(secret, payload ‖ 0x00 ‖ list): the list is bound
// unsent. Version 1 (mac over the payload alone, no list) is still read, so cursors handed out
// before the upgrade keep working through a rolling reload; only version 2 is made.
const VERSION = 2;
const UNBOUND_VERSION = 1;
const BACKWARD = 0b01;
const DESCENDING = 0b10;
const HEADER_BYTES = 10;
const MAC_BYTES = 16;
const MAX_TOKEN_CHARS = 512;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Encodes a signed, URL-safe, opaque cursor token for `position` under `binding`. */
export function encodeCursor(position: CursorPosition, binding: CursorBinding, secret: string): string {
  const param = Buffer.from(binding.orderingParam, 'utf8');
  const payload = Buffer.alloc(HEADER_BYTES + param.length);
  payload.writeUInt8(VERSION, 0);
  payload.writeUInt8(
    (position.direction === 'backward' ? BACKWARD : 0) | (binding.ordering === 'desc' ? DESCENDING : 0),
    1,
  );
  payload.writeBigInt64BE(BigInt(position.key), 2);
  param.copy(payload, HEADER_BYTES);
  return Buffer.concat([payload, sign(payload, binding.list, secret)]).toString('base64url');
}

/**
 * Decodes a cursor token, or returns null for anything not made by `encodeCursor` with this
 * secret for this exact binding: garbage, non-canonical base64, truncation, any changed byte, a
 * cursor minted for another ordering or another list.
 */
export function decodeCursor(token: string, binding: CursorBinding, secret: string): CursorPosition | null {
  if (token.length > MAX_TOKEN_CHARS || !BASE64URL.test(token)) return null;
  const bytes = Buffer.from(token, 'base64url');
  if (bytes.length < HEADER_BYTES + MAC_BYTES || bytes.toString('base64url') !== token) return null;
  const payload = bytes.subarray(0, bytes.length - MAC_BYTES);
  const version = payload.readUInt8(0);
  const list = version === UNBOUND_VERSION ? undefined : binding.list;
  if (!timingSafeEqual(bytes.subarray(payload.length), sign(payload, list, secret))) return null;
  const flags = payload.readUInt8(1);
  const key = Number(payload.readBigInt64BE(2));
  const matches =
    (version === VERSION || version === UNBOUND_VERSION) &&
    (flags & ~(BACKWARD | DESCENDING)) === 0 &&
    (flags & DESCENDING ? 'desc' : 'asc') === binding.ordering &&
    payload.subarray(HEADER_BYTES).equals(Buffer.from(binding.orderingParam, 'utf8')) &&
    Number.isSafeInteger(key);
  return matches ? { key, direction: flags & BACKWARD ? 'backward' : 'forward' } : null;
}

/** The MAC of `payload`, bound to `list` (undefined: a version 1 token, bound to no list). */
function sign(payload: Buffer, list: string | undefined, secret: string): Buffer {
  const mac = createHmac('sha256', secret).update(payload);
  if (list !== undefined) mac.update('\0').update(list, 'utf8');
  return mac.digest().subarray(0, MAC_BYTES);
}
