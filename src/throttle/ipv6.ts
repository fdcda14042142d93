/** Eight 16-bit groups of an IPv6 address, most significant first. */
export type Ipv6Groups = number[];

/**
 * Splits a valid IPv6 address (as `net.isIP` accepts it, without a zone) into eight groups.
 * Handles `::` and a dotted IPv4 tail (`::ffff:1.2.3.4`).
 */
export function parseIpv6(address: string): Ipv6Groups {
  const [head = '', tail] = address.split('::');
  const left = parseGroups(head);
  const right = tail === undefined ? [] : parseGroups(tail);
  const zeros = new Array<number>(8 - left.length - right.length).fill(0);
  return [...left, ...zeros, ...right];
}

function parseGroups(part: string): number[] {
  if (part === '') return [];
  return part.split(':').flatMap((piece) => {
    if (!piece.includes('.')) return [parseInt(piece, 16)];
    const [a = 0, b = 0, c = 0, d = 0] = piece.split('.').map(Number);
    return [(a << 8) | b, (c << 8) | d];
  });
}

/** The dotted IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:0:0/96`), if it is one. */
export function unmapIpv4(groups: Ipv6Groups): string | undefined {
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  if (!mapped) return undefined;
  const [hi = 0, lo = 0] = groups.slice(6);
  return [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff].join('.');
}

/** Keeps the first `prefix` bits (0–128) and zeroes the rest. */
export function maskIpv6(groups: Ipv6Groups, prefix: number): Ipv6Groups {
  return groups.map((group, i) => {
    const bits = Math.min(16, Math.max(0, prefix - 16 * i));
    return group & ((0xffff << (16 - bits)) & 0xffff);
  });
}

/** The RFC 5952 text of an address: lower case, no leading zeros, longest zero run as `::`. */
export function formatIpv6(groups: Ipv6Groups): string {
  const run = longestZeroRun(groups);
  const hex = groups.map((g) => g.toString(16));
  if (run.length < 2) return hex.join(':');
  return `${hex.slice(0, run.start).join(':')}::${hex.slice(run.start + run.length).join(':')}`;
}

function longestZeroRun(groups: Ipv6Groups): { start: number; length: number } {
  let best = { start: 0, length: 0 };
  let start = -1;
  groups.forEach((group, i) => {
    if (group !== 0) {
      start = -1;
      return;
    }
    if (start < 0) start = i;
    if (i - start + 1 > best.length) best = { start, length: i - start + 1 };
  });
  return best;
}
