import { readFileSync } from 'node:fs';

/**
 * The sliding-log check-and-record, as one Redis Lua script (Redis 7, Lua 5.1 + `struct`), kept in
 * ring.lua beside this module and read once when it loads.
 *
 * A request is admissible iff fewer than N of the admitted requests are inside the window, i.e.
 * iff the N-th most recent admission has left it. Each key holds the log of the most recent
 * admissions of one client in one scope, in one string:
 *
 *   header (40 bytes): marker, head, size, gone (uint32), last, expires (double, µs), widest (double, ms)
 *   entries: `size` doubles (µs of Redis `TIME`), a ring read from `head`, oldest first
 *
 * The marker is "PLR1" when the header is exact. A log of a limit up to 128, read whole, is
 * marked "PLRa" (lagging): while it grows (head 0) an admission may APPEND its entry without
 * rewriting the header, so the header's size, gone and last may lag behind; the log's length
 * counts its entries, the last one is the newest, and the stored gone stays a lower bound (entries
 * only ever join at the end). The header is written again when gone has fallen LAG entries
 * behind, the expiry moves, or the log is rewritten. A reader by slots (limit above 128) takes
 * the size of a lagging log from STRLEN.
 *
 * `widest` is the longest window any process has checked this log with while it lived (one
 * window normally; two during a rolling reload that changes it). `gone` counts the oldest
 * entries already known to have left that window (so they have left any shorter one) and `last` is the
 * newest entry, so a check looks only at the header and the few entries that left since the
 * client's previous admission. A log of a limit up to 128 (at most 1,064 bytes) is read with
 * one GET; a larger one by header and slots (GETRANGE, a few dozen bytes), so the time of a
 * check does not grow with N and no large string crosses into Lua. Scanning starts with 8
 * entries and reads 4 times more each step; when `last` itself has left, nothing is scanned.
 *
 * Until N entries are held the log grows by APPEND (head 0); the admission that fills it writes
 * it once more as a new string (APPEND keeps spare room). Entries older than two widest windows
 * may be dropped when a log is rewritten, never newer ones: a window widened up to twofold by a
 * rolling reload still finds every entry it needs. Once full an admission overwrites the
 * oldest entry (which has left, or the request would be refused) and advances the head. So an
 * admission writes the entry and the header (two small SETRANGE/APPEND), or only the entry while
 * a lagging log grows (one APPEND, the common case of a client under its limit). A growing log
 * whose entries have mostly left twice `widest` is rewritten without them. Rejections write nothing.
 *
 * The key expires on its own: an admission less than two (widest) windows before the key's
 * expiry moves it to three windows ahead (so one PEXPIRE per window per client, not per
 * request), never earlier. A key is therefore gone between two and three windows after its
 * client's last admission: every entry has left the window by then, and has left any window up to
 * twice as long, so a reload that widens a scope's window up to twofold stays exact even for a
 * key that only the narrower window has checked so far.
 *
 * A log stored for another limit or window stays exact: the count inside the window does not
 * depend on N, and nothing inside the widest window is dropped except behind the N-th most
 * recent entry; an admission that finds a log longer than N (limit lowered) or a full ring
 * shorter than N (limit raised) rewrites it oldest-first. So workers briefly running different
 * limits or windows (a rolling reload; a window at most doubled, see expiry above) each enforce
 * their own exactly. (Changing both at once is exact for the process with the smaller limit; one with a larger limit and a longer window
 * may miss entries the other trimmed, until the reload ends.) A value that is not such a log is
 * replaced; a key of another type is an error.
 *
 * One call decides a batch of requests, one after another, at one reading of the clock.
 * KEYS holds every check's log, request after request. ARGV[1] lists the batch's distinct rules
 * as `N ms N ms …` (limit, window in ms; decimal, space-separated); ARGV[2] is the layout, one
 * byte each: per request its number of checks c, then c 1-based rule indices. (Lua parses a few
 * bytes far faster than a number per check.) A request with one check is decided and recorded
 * in one pass; one with several is decided first, then its logs are read again and recorded only
 * if every one admits. A later request of the batch sees the earlier ones' records, so the
 * batch decides exactly as the same requests would with one call each. A log's instant is never
 * earlier than its newest entry, so a clock stepping back cannot unsort it.
 *
 * ARGV[3] is the caller's deadline in µs of Redis's clock ('0': none): a call that starts later
 * decides nothing and records nothing (its caller has answered its requests without it) and
 * returns just two doubles, -2 and the clock.
 *
 * Returns one string: per check, 4 little-endian doubles (allowed 1/0, remaining, resetMs,
 * retryAfterS; see Decision), then the clock (µs, a double). A request that failed (a key of another type, a write refused for
 * memory) has -1 as its first check's `allowed`; its error texts follow the clock, one per
 * line, in the order of the failed requests. The other requests of the batch are decided as usual.
 */
export const RING_SCRIPT = readFileSync(new URL('./ring.lua', import.meta.url), 'utf8');
