/**
 * The sliding-log check-and-record, as one Redis Lua script (Redis 7, Lua 5.1 + `struct`).
 *
 * Each key holds a ring of the last admitted requests in one string: an 8-byte header with the
 * head index, then one 8-byte double per slot (microseconds of Redis `TIME`; 0 = empty), so
 * 8·(N+1) bytes for a limit N. Read from the head, the ring is in time order, so the request is
 * admissible iff the N-th most recent admission has left the window: one slot read, O(1). The
 * count still inside the window (for `remaining`) is a binary search, O(log N). Admitting
 * overwrites the head slot and advances the head (two SETRANGEs), then PEXPIREs the key to the
 * window, after which every entry has left it anyway. Rejections write nothing.
 *
 * KEYS[i] is check i's ring, ARGV[2i-1] its limit N and ARGV[2i] its window in ms. All checks are
 * decided at one reading of the clock and recorded only if every one admits: with several
 * checks, a first pass decides without writing, a second records. A ring's instant is never
 * earlier than its newest entry, so a clock stepping back cannot unsort it.
 *
 * A ring stored for another limit stays exact: a smaller one is padded with empty slots; a
 * larger one is cut to N when the entries cut are outside the window, and otherwise used as is
 * (an admission overwrites its oldest entry, which is then outside the window). So workers
 * briefly running different limits (a rolling reload) each enforce their own exactly.
 *
 * Per-call closures and tables are a large part of a script this small, hence one decision
 * function with locals rather than a table per check. Returns 4 integers per check: allowed
 * (1/0), remaining, resetMs, retryAfterS (see Decision).
 */
export const RING_SCRIPT = `
local unpack, pack, floor, ceil, max = struct.unpack, struct.pack, math.floor, math.ceil, math.max
local SLOT = 8

-- entry j of a ring, 0 = oldest
local function entry(s, head, size, j)
  return (unpack('<d', s, 1 + SLOT * (1 + (head + j) % size)))
end

-- decides check i at now; records it if allowed and record is true; returns the 4 results
local function check(i, now, record)
  local key, n, window_ms = KEYS[i], tonumber(ARGV[2 * i - 1]), tonumber(ARGV[2 * i])
  local window, s = window_ms * 1000, redis.call('GET', key)
  local size = s and #s / SLOT - 1 or 0
  local head = size >= 1 and unpack('<d', s) or -1
  if size % 1 ~= 0 or head < 0 or head >= size or head % 1 ~= 0 then
    -- no ring (or not one of ours): the request is the first of its window
    if record then redis.call('SET', key, pack('<d', 1 % n) .. pack('<d', now) .. string.rep('\\0', SLOT * (n - 1)), 'PX', window_ms) end
    return 1, record and n - 1 or n, record and window_ms or 0, 0
  end
  local fresh = size < n or (size > n and entry(s, head, size, size - n - 1) <= now - window)
  if fresh then
    local kept = {}
    for j = max(0, size - n), size - 1 do kept[#kept + 1] = pack('<d', entry(s, head, size, j)) end
    local stamps = table.concat(kept)
    s, head, size = pack('<d', 0) .. string.rep('\\0', SLOT * n - #stamps) .. stamps, 0, n
  end
  now = max(now, entry(s, head, size, size - 1))
  local nth = entry(s, head, size, size - n)
  if nth > now - window then
    local wait = nth + window - now
    return 0, 0, ceil(wait / 1000), max(1, ceil(wait / 1000000))
  end
  -- the first entry inside the window; the N-th most recent and older are outside
  local lo, hi = size - n + 1, size
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if entry(s, head, size, mid) > now - window then hi = mid else lo = mid + 1 end
  end
  local oldest = lo < size and entry(s, head, size, lo) or nil
  if not record then return 1, n - (size - lo), oldest and ceil((oldest + window - now) / 1000) or 0, 0 end
  local at, stamp, header = SLOT * (1 + head), pack('<d', now), pack('<d', (head + 1) % size)
  if fresh then
    redis.call('SET', key, header .. string.sub(s, SLOT + 1, at) .. stamp .. string.sub(s, at + SLOT + 1), 'PX', window_ms)
  else
    redis.call('SETRANGE', key, at, stamp)
    redis.call('SETRANGE', key, 0, header)
    redis.call('PEXPIRE', key, window_ms)
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
