/**
 * The sliding-log check-and-record, as one Redis Lua script (Redis 7, Lua 5.1 + `struct`).
 *
 * Each key holds a log of the most recent admitted requests in one string: an 8-byte header with
 * the head index, then one 8-byte double per entry (microseconds of Redis `TIME`), at most N
 * entries for a limit N, so at most 8·(N+1) bytes. Read from the head, the entries are in time
 * order, so the request is admissible iff the N-th most recent admission has left the window:
 * one entry read, O(1). The count still inside the window (for `remaining`) is a binary search,
 * O(log N). Until N requests have been recorded the log grows by APPEND (head 0); once full it
 * is a ring (rewritten once, without APPEND's spare allocation): an admission overwrites the
 * oldest entry and advances the head (two SETRANGEs).
 * Every admission PEXPIREs the key to the window, after which every entry has left it anyway.
 * Rejections write nothing. Small logs (limit ≤ 128) are read with one GET; larger ones entry
 * by entry with GETRANGE, so a limit of 100,000 costs a few dozen bytes per check, not 800 kB.
 *
 * KEYS[i] is check i's log, ARGV[2i-1] its limit N and ARGV[2i] its window in ms. All checks are
 * decided at one reading of the clock and recorded only if every one admits: with several
 * checks, a first pass decides without writing, a second records. A log's instant is never
 * earlier than its newest entry, so a clock stepping back cannot unsort it.
 *
 * A log stored for another limit stays exact: admission always looks at the N-th most recent
 * entry of the current limit; when an admission finds a log longer than N (limit lowered) or a
 * short ring (limit raised), it rewrites it oldest-first, dropping only entries older than the
 * N-th most recent, which are outside the window. So workers briefly running different limits
 * (a rolling reload) each enforce their own exactly.
 *
 * Returns 4 integers per check: allowed (1/0), remaining, resetMs, retryAfterS (see Decision).
 */
export const RING_SCRIPT = `
local unpack, pack, floor, ceil, max = struct.unpack, struct.pack, math.floor, math.ceil, math.max
local SLOT, WHOLE = 8, 128

-- entry j of a log (0 = oldest): from the string s when it was read whole, else by GETRANGE
local function entry(key, s, head, size, j)
  local at = SLOT * (1 + (head + j) % size)
  if s then return (unpack('<d', s, at + 1)) end
  return (unpack('<d', redis.call('GETRANGE', key, at, at + SLOT - 1)))
end

-- the stored log: s (nil unless read whole), head, size; size 0 when absent or not one of ours
local function open(key, n)
  local s, len
  if n <= WHOLE then
    s = redis.call('GET', key)
    len = s and #s or 0
  else
    len = redis.call('STRLEN', key)
  end
  if len < 2 * SLOT or len % SLOT ~= 0 then return nil, 0, 0 end
  local head = unpack('<d', s or redis.call('GETRANGE', key, 0, SLOT - 1))
  local size = len / SLOT - 1
  if head < 0 or head >= size or head % 1 ~= 0 then return nil, 0, 0 end
  return s, head, size
end

-- decides check i at now; records it if allowed and record is true; returns the 4 results
local function check(i, now, record)
  local key, n, window_ms = KEYS[i], tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local window = window_ms * 1000
  local s, head, size = open(key, n)
  if size == 0 then
    if record then redis.call('SET', key, pack('<d', 0) .. pack('<d', now), 'PX', window_ms) end
    return 1, record and n - 1 or n, record and window_ms or 0, 0
  end
  now = max(now, entry(key, s, head, size, size - 1))
  if size >= n then
    local nth = entry(key, s, head, size, size - n)
    if nth > now - window then
      local wait = nth + window - now
      return 0, 0, ceil(wait / 1000), max(1, ceil(wait / 1000000))
    end
  end
  -- the first entry inside the window; the N-th most recent and older are outside
  local lo, hi = max(0, size - n + 1), size
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if entry(key, s, head, size, mid) > now - window then hi = mid else lo = mid + 1 end
  end
  local oldest = lo < size and entry(key, s, head, size, lo) or nil
  if not record then return 1, n - (size - lo), oldest and ceil((oldest + window - now) / 1000) or 0, 0 end
  local stamp = pack('<d', now)
  if size == n then
    redis.call('SETRANGE', key, SLOT * (1 + head), stamp)
    redis.call('SETRANGE', key, 0, pack('<d', (head + 1) % size))
    redis.call('PEXPIRE', key, window_ms)
  elseif size + 1 < n and head == 0 then
    redis.call('APPEND', key, stamp)
    redis.call('PEXPIRE', key, window_ms)
  elseif size + 1 == n and head == 0 then
    -- the log becomes full: written once more as a new string, so APPEND's slack is not kept
    redis.call('SET', key, (s or redis.call('GET', key)) .. stamp, 'PX', window_ms)
  else
    local kept = { pack('<d', 0) }
    for j = max(0, size - n + 1), size - 1 do kept[#kept + 1] = pack('<d', entry(key, s, head, size, j)) end
    kept[#kept + 1] = stamp
    redis.call('SET', key, table.concat(kept), 'PX', window_ms)
  end
  return 1, n - (size - lo) - 1, ceil(((oldest or now) + window - now) / 1000), 0
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local admitted = true
if #KEYS > 1 then
  for i = 1, #KEYS do
    if check(i, now, false) == 0 then admitted = false end
  end
end
local out = {}
for i = 1, #KEYS do
  out[4 * i - 3], out[4 * i - 2], out[4 * i - 1], out[4 * i] = check(i, now, admitted)
end
return out
`;
