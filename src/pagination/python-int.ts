/**
 * Python's `int(text)` for query values, which DRF and Django feed straight to it: surrounding
 * whitespace, a sign, leading zeros, `_` between digits and any Unicode decimal digits are
 * accepted; anything else (`1.0`, `abc`, empty) is not.
 */

const PY_SPACE = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/u;
const DECIMAL_DIGIT = /\p{Nd}/u;
const INT_SYNTAX = /^[+-]?[0-9]+(?:_[0-9]+)*$/;
// CPython refuses longer decimal strings (sys.int_info.default_max_str_digits).
const MAX_DIGITS = 4300;

/** Parses `text` as Python's `int()` would, or returns null where Python raises ValueError. */
export function parsePythonInt(text: string): bigint | null {
  // Longer text cannot be a valid int: refuse it before any per-character work.
  if (text.length > 2 * MAX_DIGITS + 64) return null;
  const ascii = trimPythonSpace([...text].map(convertToAsciiDigit));
  if (!INT_SYNTAX.test(ascii)) return null;
  const digits = ascii.replace(/^[+-]/, '').replaceAll('_', '');
  if (digits.length > MAX_DIGITS) return null;
  const magnitude = BigInt(digits);
  return ascii.startsWith('-') ? -magnitude : magnitude;
}

/** Drops Python whitespace at both ends, in linear time (an end-anchored regex is quadratic). */
function trimPythonSpace(chars: string[]): string {
  let start = 0;
  let end = chars.length;
  while (start < end && PY_SPACE.test(chars[start]!)) start += 1;
  while (end > start && PY_SPACE.test(chars[end - 1]!)) end -= 1;
  return chars.slice(start, end).join('');
}

function convertToAsciiDigit(char: string): string {
  if (char.length === 1 && char >= '0' && char <= '9') return char;
  if (!DECIMAL_DIGIT.test(char)) return char;
  // Unicode encodes every decimal digit set as a run of ten, 0 to 9, so the value is the
  // distance from the start of the run of digits, modulo ten.
  const point = char.codePointAt(0) ?? 0;
  let start = point;
  while (DECIMAL_DIGIT.test(String.fromCodePoint(start - 1))) start -= 1;
  return String((point - start) % 10);
}
