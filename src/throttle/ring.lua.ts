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
 * decided at one instant and recorded only if every one admits. The instant is never earlier than
 * the newest recorded one, so a clock stepping back cannot unsort a ring.
 *
 * A ring stored for another limit stays exact: a smaller one is padded (reading only), a larger
 * one is used as is and cut to N when a request is admitted, which drops only entries already
 * outside the window. So workers briefly running different limits (a rolling reload) each
 * enforce their own limit exactly.
 *
 * Returns 4 integers per check: allowed (1/0), remaining, resetMs, retryAfterS (see Decision).
 */
export const RING_SCRIPT = `
local SLOT = 8

-- ring: s = stored bytes, head = slot of the oldest entry, size = slots, fresh = s not stored
local function slot_at(ring, j)
  return (struct.unpack('<d', ring.s, 1 + SLOT * (1 + (ring.head + j) % ring.size)))
end

local function new_ring(stamps, n)
  local body = string.rep('\\0', SLOT * n - #stamps) .. stamps
  return { s = struct.pack('<d', 0) .. body, head = 0, size = n, fresh = true }
end

-- the ring cut or padded to n slots, keeping the most recent entries
local function resize(ring, n)
  local kept = {}
  for j = math.max(0, ring.size - n), ring.size - 1 do
    kept[#kept + 1] = struct.pack('<d', slot_at(ring, j))
  end
  return new_ring(table.concat(kept), n)
end

local function load_ring(key, n)
  local s = redis.call('GET', key)
  local size = s and (#s / SLOT - 1) or 0
  local head = size >= 1 and struct.unpack('<d', s) or -1
  if size % 1 ~= 0 or head < 0 or head >= size or head % 1 ~= 0 then return new_ring('', n) end
  local ring = { s = s, head = head, size = size, fresh = false }
  if size < n then return resize(ring, n) end
  return ring
end

-- the first entry (from the oldest) inside the window, searching [lo, size]; size when none is
local function first_inside(ring, lo, floor)
  local hi = ring.size
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if slot_at(ring, mid) > floor then hi = mid else lo = mid + 1 end
  end
  return lo
end

local function record(c, now)
  local ring = c.ring
  if ring.size > c.n then ring = resize(ring, c.n) end
  local at = SLOT * (1 + ring.head)
  local stamp = struct.pack('<d', now)
  local header = struct.pack('<d', (ring.head + 1) % ring.size)
  if ring.fresh then
    local s = header .. string.sub(ring.s, SLOT + 1, at) .. stamp .. string.sub(ring.s, at + SLOT + 1)
    redis.call('SET', c.key, s, 'PX', c.window_ms)
  else
    redis.call('SETRANGE', c.key, at, stamp)
    redis.call('SETRANGE', c.key, 0, header)
    redis.call('PEXPIRE', c.key, c.window_ms)
  end
end

local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local checks = {}
for i, key in ipairs(KEYS) do
  local n = tonumber(ARGV[2 * i - 1])
  local ring = load_ring(key, n)
  now = math.max(now, slot_at(ring, ring.size - 1))
  checks[i] = { key = key, n = n, window_ms = tonumber(ARGV[2 * i]), ring = ring }
end

local admitted = true
for _, c in ipairs(checks) do
  c.window = c.window_ms * 1000
  c.nth = slot_at(c.ring, c.ring.size - c.n)
  c.allowed = c.nth <= now - c.window
  if not c.allowed then admitted = false end
end

local out = {}
for _, c in ipairs(checks) do
  local remaining, oldest, retry = 0, nil, 0
  if not c.allowed then
    oldest = c.nth
    retry = math.max(1, math.ceil((oldest + c.window - now) / 1000000))
  else
    local first = first_inside(c.ring, c.ring.size - c.n + 1, now - c.window)
    local inside = c.ring.size - first
    if inside > 0 then oldest = slot_at(c.ring, first) end
    remaining = c.n - inside
    if admitted then
      record(c, now)
      remaining = remaining - 1
      oldest = oldest or now
    end
  end
  out[#out + 1] = c.allowed and 1 or 0
  out[#out + 1] = remaining
  out[#out + 1] = oldest and math.ceil((oldest + c.window - now) / 1000) or 0
  out[#out + 1] = retry
end
return out
`;
