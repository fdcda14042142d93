/**
 * The sliding-log check-and-record, as one Redis Lua script (Redis 7, Lua 5.1 + `struct`).
 *
 * A request is admissible iff fewer than N of the admitted requests are inside the window, i.e.
 * iff the N-th most recent admission has left it. Each key holds the log of the most recent
 * admissions of one client in one scope, in one string:
 *
 *   header (40 bytes): "PLR1", head, size, gone (uint32), last, expires (double, µs), widest (double, ms)
 *   entries: `size` doubles (µs of Redis `TIME`), a ring read from `head`, oldest first
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
 * it once more as a new string (APPEND keeps spare room). Once full an admission overwrites the
 * oldest entry (which has left, or the request would be refused) and advances the head. So an
 * admission writes the entry and the header (two small SETRANGE/APPEND). A growing log whose
 * entries have mostly left `widest` is rewritten without them. Rejections write nothing.
 *
 * The key expires on its own: an admission that would outlive the key's expiry sets it to two
 * (widest) windows ahead (so one PEXPIRE per window per client, not per request), never
 * earlier. A key is therefore gone between one and two windows after its client's last
 * admission; every entry in it has left the window by then anyway.
 *
 * A log stored for another limit or window stays exact: the count inside the window does not
 * depend on N, and nothing inside the widest window is dropped except behind the N-th most
 * recent entry; an admission that finds a log longer than N (limit lowered) or a full ring
 * shorter than N (limit raised) rewrites it oldest-first. So workers briefly running different
 * limits or windows (a rolling reload) each enforce their own exactly. (Changing both at once
 * is exact for the process with the smaller limit; one with a larger limit and a longer window
 * may miss entries the other trimmed, until the reload ends.) A value that is not such a log is
 * replaced; a key of another type is an error.
 *
 * One call decides a batch of requests, one after another, at one reading of the clock.
 * KEYS holds every check's log, request after request. ARGV[1] lists the batch's distinct rules
 * as `N ms N ms …` (limit, window in ms; decimal, space-separated); ARGV[2] is the layout, one
 * byte each: per request its number of checks c, then c 1-based rule indices. (Lua parses a few
 * bytes far faster than a number per check.) A request's checks are recorded only if every one
 * admits. A later request of the
 * batch sees the earlier ones' records, so the batch decides exactly as the same requests would
 * with one call each. A log's instant is never earlier than its newest entry, so a clock
 * stepping back cannot unsort it.
 *
 * Returns one string: per check, 4 little-endian doubles (allowed 1/0, remaining, resetMs,
 * retryAfterS; see Decision). A request that failed (a key of another type, a write refused for
 * memory) has -1 as its first check's `allowed`; its error texts follow the doubles, one per
 * line, in the order of the failed requests. The other requests of the batch are decided as usual.
 */
export const RING_SCRIPT = `
local unpack, pack, ceil, max, min = struct.unpack, struct.pack, math.ceil, math.max, math.min
local MAGIC, HEADER_FORMAT, HEADER, SLOT, WHOLE = 'PLR1', '<c4I4I4I4ddd', 40, 8, 128
local limits, windows = {}, {}

-- physical slots [from, from + count) of a log: a string and the offset of the first slot in it;
-- nil if the value is too short. A log read whole is sliced in place, others by GETRANGE.
local function slots(log, from, count)
  if log.whole then return log.whole, HEADER + SLOT * from end
  local s = redis.call('GETRANGE', log.key, HEADER + SLOT * from, HEADER + SLOT * (from + count) - 1)
  if #s == SLOT * count then return s, 0 end
end

-- logical entry j (0 = oldest) of a loaded log
local function entry(log, j)
  local s, at = slots(log, (log.head + j) % log.size, 1)
  return s and unpack('<d', s, at + 1) or 0
end

-- reads the log at key and decides it at now for limit n and window_ms: a table. A log of a
-- limit up to WHOLE is read with one GET (a few hundred bytes), a larger one by header and slots.
local function load(key, n, window_ms, now)
  -- every field named here, so the table is sized once (nil fields would grow it later)
  local log = {
    key = key, n = n, window_ms = window_ms, window = window_ms * 1000, now = now, size = 0, head = 0, gone = 0,
    expires = 0, inside = 0, whole = false, first = false, wait = false, widest_ms = window_ms, kept_gone = 0,
  }
  local h
  if n <= WHOLE then
    h = redis.call('GET', key) or ''
  else
    h = redis.call('GETRANGE', key, 0, HEADER - 1)
  end
  if #h >= HEADER then
    local magic, head, size, gone, last, expires, widest_ms = unpack(HEADER_FORMAT, h)
    if magic == MAGIC and size >= 1 and head < size and gone <= size and widest_ms >= 1
      and (n > WHOLE or #h == HEADER + SLOT * size) then
      log.head, log.size, log.expires, log.widest_ms = head, size, expires, max(widest_ms, window_ms)
      -- the stored gone counts entries out of the widest window: out of this one too, if narrower
      if widest_ms >= window_ms then log.gone, log.kept_gone = gone, gone end
      if n <= WHOLE then log.whole = h end
      now = max(now, last)
      if last <= now - log.window then log.gone = size end
    end
  end
  log.now = now
  local cutoff, step = now - log.window, 8
  while log.gone < log.size and not log.first do
    local from = (log.head + log.gone) % log.size
    local count = min(step, log.size - log.gone, log.size - from)
    local s, at = slots(log, from, count)
    if not s then
      log.size, log.head, log.gone = 0, 0, 0
      break
    end
    for j = 0, count - 1 do
      local stamp = unpack('<d', s, at + SLOT * j + 1)
      if stamp > cutoff then
        log.first = stamp
        break
      end
      log.gone = log.gone + 1
    end
    step = step * 4
  end
  log.inside = log.size - log.gone
  if log.widest_ms == window_ms then log.kept_gone = log.gone end
  if log.inside >= n then
    -- the N-th most recent admission is still inside: refused until it leaves
    local nth = log.size - n == log.gone and log.first or entry(log, log.size - n)
    log.wait = nth + log.window - now
  end
  return log
end

-- physical slots [from, from + count) of a log as a string of their own ('' if unreadable)
local function span(log, from, count)
  local s, at = slots(log, from, count)
  return s and s:sub(at + 1, at + SLOT * count) or ''
end

-- rewrites the log oldest-first with its newest entries still inside (at most n - 1) and stamp
local function rewrite(log, stamp, expires)
  local keep = min(log.size - log.kept_gone, log.n - 1)
  local parts = { pack(HEADER_FORMAT, MAGIC, 0, keep + 1, 0, log.now, expires, log.widest_ms) }
  local from = (log.head + log.size - keep) % log.size
  local first = min(keep, log.size - from)
  if first > 0 then parts[#parts + 1] = span(log, from, first) end
  if keep > first then parts[#parts + 1] = span(log, 0, keep - first) end
  parts[#parts + 1] = stamp
  local value = table.concat(parts)
  if #value ~= HEADER + SLOT * (keep + 1) then value = pack(HEADER_FORMAT, MAGIC, 0, 1, 0, log.now, expires, log.widest_ms) .. stamp end
  redis.call('SET', log.key, value, 'PX', 2 * log.widest_ms)
end

-- records an admission at log.now
local function record(log)
  local key, now, n = log.key, log.now, log.n
  local widest_ms, kept_gone = log.widest_ms, log.kept_gone
  local stamp, expires, lifetime = pack('<d', now), log.expires, 2 * widest_ms * 1000
  local refresh = expires < now + widest_ms * 1000
  if refresh then expires = now + lifetime end
  if log.size == 0 then
    redis.call('SET', key, pack(HEADER_FORMAT, MAGIC, 0, 1, 0, now, now + lifetime, widest_ms) .. stamp, 'PX', 2 * widest_ms)
    return
  elseif log.size == n then
    -- full: the oldest entry has left (else refused); the new one takes its slot
    redis.call('SETRANGE', key, HEADER + SLOT * log.head, stamp)
    redis.call('SETRANGE', key, 0, pack(HEADER_FORMAT, MAGIC, (log.head + 1) % n, n, max(0, kept_gone - 1), now, expires, widest_ms))
  elseif log.size + 1 == n and log.head == 0 then
    -- the log becomes full: written once more as a new string, so APPEND's spare room is not kept
    local entries = span(log, 0, log.size)
    local header = pack(HEADER_FORMAT, MAGIC, 0, n, kept_gone, now, now + lifetime, widest_ms)
    redis.call('SET', key, header .. entries .. stamp, 'PX', 2 * widest_ms)
    return
  elseif log.size < n and log.head == 0 and (kept_gone < 16 or 2 * kept_gone < log.size) then
    redis.call('APPEND', key, stamp)
    redis.call('SETRANGE', key, 0, pack(HEADER_FORMAT, MAGIC, 0, log.size + 1, kept_gone, now, expires, widest_ms))
  else
    return rewrite(log, stamp, now + lifetime)
  end
  if refresh then redis.call('PEXPIRE', key, 2 * widest_ms) end
end

-- the 4 results of a check: admitted and recorded, allowed but not recorded, or refused
local function result(log, recorded)
  if log.wait then return pack('<dddd', 0, 0, ceil(log.wait / 1000), max(1, ceil(log.wait / 1000000))) end
  local reset = log.first and ceil((log.first + log.window - log.now) / 1000) or (recorded and log.window_ms or 0)
  return pack('<dddd', 1, log.n - log.inside - (recorded and 1 or 0), reset, 0)
end

-- decides one request whose checks are KEYS[k + 1 .. k + c], rule indices at layout[at + 1 .. at + c]
local function request(k, c, layout, at, now, out)
  local logs, admitted = {}, true
  for j = 1, c do
    local rule = string.byte(layout, at + j)
    logs[j] = load(KEYS[k + j], limits[rule], windows[rule], now)
    if logs[j].wait then admitted = false end
  end
  for j = 1, c do
    if admitted then record(logs[j]) end
    out[#out + 1] = result(logs[j], admitted)
  end
end

for number in string.gmatch(ARGV[1], '%d+') do
  if #limits == #windows then limits[#limits + 1] = tonumber(number) else windows[#windows + 1] = tonumber(number) end
end
local layout = ARGV[2]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local out, errors = {}, {}
local k, at = 0, 0
while at < #layout do
  local c = string.byte(layout, at + 1)
  local before = #out
  local ok, err = pcall(request, k, c, layout, at + 1, now, out)
  if not ok then
    for j = before + 1, before + c do out[j] = pack('<dddd', j == before + 1 and -1 or 0, 0, 0, 0) end
    errors[#errors + 1] = (string.gsub(type(err) == 'table' and (err.err or 'ERR throttle script') or tostring(err), '%s+', ' '))
  end
  k, at = k + c, at + 1 + c
end
return table.concat(out) .. table.concat(errors, '\\n')
`;
