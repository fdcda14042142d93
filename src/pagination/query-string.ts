/**
 * Query strings parsed and written the way Python's `urllib.parse` does (`parse_qs` with blank
 * values kept, `urlencode` over sorted keys with `quote_plus`), so links match DRF's byte for byte.
 */

/** Parsed query: each key with its values in order, keys in order of first appearance. */
export type QueryParams = Map<string, string[]>;

const ALWAYS_SAFE = /[A-Za-z0-9_.~-]/;
const ASCII_RUNS = /([\x00-\x7f]+)/;
const HEX_PAIR = /^[0-9A-Fa-f]{2}$/;
const utf8 = new TextDecoder('utf-8');

/** Parses a query string (with or without its leading `?`) like `parse_qs(keep_blank_values=True)`. */
export function parseQuery(search: string): QueryParams {
  const query: QueryParams = new Map();
  const text = search.startsWith('?') ? search.slice(1) : search;
  for (const field of text.split('&')) {
    if (field === '') continue;
    const eq = field.indexOf('=');
    const name = unquotePlus(eq === -1 ? field : field.slice(0, eq));
    const value = eq === -1 ? '' : unquotePlus(field.slice(eq + 1));
    const values = query.get(name);
    if (values === undefined) query.set(name, [value]);
    else values.push(value);
  }
  return query;
}

/** The value a Django view reads for `key`: the last one given, or undefined when absent. */
export function readLastValue(query: QueryParams, key: string): string | undefined {
  const values = query.get(key);
  return values === undefined ? undefined : values[values.length - 1];
}

/** Serialises like `urlencode(sorted(query.items()), doseq=True)`: keys by code point, values in order. */
export function encodeQuery(query: QueryParams): string {
  const keys = [...query.keys()].sort(compareCodePoints);
  const fields: string[] = [];
  for (const key of keys) {
    for (const value of query.get(key) ?? []) fields.push(`${quotePlus(key)}=${quotePlus(value)}`);
  }
  return fields.join('&');
}

/** Python's `quote_plus(text, safe='')`: UTF-8 percent-encoding, space as `+`. */
export function quotePlus(text: string): string {
  let out = '';
  for (const char of text) {
    if (char === ' ') out += '+';
    else if (ALWAYS_SAFE.test(char)) out += char;
    else for (const byte of Buffer.from(char, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Python's `unquote(text.replace('+', ' '))`: bad escapes stay literal, bad UTF-8 becomes U+FFFD. */
export function unquotePlus(text: string): string {
  const spaced = text.replaceAll('+', ' ');
  if (!spaced.includes('%')) return spaced;
  return spaced
    .split(ASCII_RUNS)
    .map((part, index) => (index % 2 === 1 ? utf8.decode(unquoteToBytes(part)) : part))
    .join('');
}

function unquoteToBytes(ascii: string): Uint8Array {
  const bytes: number[] = [];
  for (let i = 0; i < ascii.length; i += 1) {
    const pair = ascii.slice(i + 1, i + 3);
    if (ascii[i] === '%' && HEX_PAIR.test(pair)) {
      bytes.push(parseInt(pair, 16));
      i += 2;
    } else {
      bytes.push(ascii.charCodeAt(i));
    }
  }
  return Uint8Array.from(bytes);
}

function compareCodePoints(a: string, b: string): number {
  const left = [...a];
  const right = [...b];
  for (let i = 0; i < Math.min(left.length, right.length); i += 1) {
    const diff = (left[i]?.codePointAt(0) ?? 0) - (right[i]?.codePointAt(0) ?? 0);
    if (diff !== 0) return diff;
  }
  return left.length - right.length;
}
