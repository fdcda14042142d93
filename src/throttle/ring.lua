--[[
  Checks and records a batch of requests against sliding logs, one log per client and scope,
  atomically and in Redis's clock (docs/throttling.md "The log in Redis").

  Input:
    KEYS[1..]  every check's log, request after request
    ARGV[1]    the batch's distinct rules: 'N ms N ms ...' (limit, window in ms; decimal)
    ARGV[2]    the layout, one byte each: per request its number of checks c, then c 1-based
               rule indices; or c + 64, then per check a pair: its enforced rule (127: none, the
               check is wholly in shadow) and its shadow rule (127: none). A check with both has
               two keys, its log then its shadow log; any other check one, its log.
    ARGV[3]    the caller's deadline in µs of Redis's clock ('0': none)
    ARGV[4]    '1': peek, decide every check by its enforced rule (else its shadow one) and
               record nothing
    ARGV[5]    the checks' costs in units, one per check in order: 'c c ...' (decimal); absent or
               '': every check costs 1 (docs/throttling.md "Cost: requests that weigh more")

  Output: one string of little-endian doubles
    per check: allowed (1/0; 2: admitted, but its shadow rule would have refused), remaining
    (units), resetMs, retryAfterS; then the clock (µs). A shadow rule decides only admitted requests and
    records them in its own log (docs/throttling.md "Shadow rules").
    A request that failed (a key of another type, a write refused for memory) has -1 as its first
    check's allowed; its error texts follow the clock, one per line.
    Past the deadline: just -2 and the clock; nothing decided, nothing recorded.

  A log (one string value): a 40-byte header '<c4I4I4I4ddd' (marker 'PLR1' exact or 'PLRa'
  lagging, head, size, gone, last µs, expires µs, widest ms), then `size` entries (doubles, µs
  of TIME), a ring read from head, oldest first. A value that is not such a log is replaced.
  A check of cost c is admitted iff the units inside the window plus c are at most N, and records c
  entries of the same instant, so every claim about entries holds for units.
]]
local unpack, pack, ceil, floor, max, min, byte = struct.unpack, struct.pack, math.ceil, math.floor, math.max, math.min, string.byte
local MAGIC, LAGGING, HEADER_FORMAT, HEADER, SLOT, WHOLE = 'PLR1', 'PLRa', '<c4I4I4I4ddd', 40, 8, 128
-- a key lives LIFE (widest) windows past the admission that last moved its expiry, and at least
-- LIFE - 1 past every admission
local LIFE = 3
-- entries the scan may cross past a lagging header's gone before an admission writes the header again
local LAG = 8
-- the layout's marks: a request with shadow rules counts its checks from PAIRED; NONE names no rule
local PAIRED, NONE, SHADOW_REFUSED = 64, 127, 2
local limits, windows = {}, {}
-- the checks' costs when ARGV[5] names them (else every check costs 1), by the check's place in the reply
local costs = false

-- physical slots [from, from + count) of the log at key: a string and the offset of the first slot
-- in it; nil if the value is too short. A log read whole is sliced in place, others by GETRANGE.
local function slots(key, whole, from, count)
  if whole then return whole, HEADER + SLOT * from end
  local s = redis.call('GETRANGE', key, HEADER + SLOT * from, HEADER + SLOT * (from + count) - 1)
  if #s == SLOT * count then return s, 0 end
end

-- how many of the oldest upto entries (ring order from head) are at or before cutoff: entries are
-- sorted, so a binary search of single slots (unreadable counts as newer, keeping more)
local function older_than(key, whole, head, size, upto, cutoff)
  local low, high = 0, upto
  while low < high do
    local mid = floor((low + high) / 2)
    local s, at = slots(key, whole, (head + mid) % size, 1)
    if s and unpack('<d', s, at + 1) <= cutoff then low = mid + 1 else high = mid end
  end
  return low
end

-- whether a growing log holds enough entries older than cutoff to be worth rewriting without them
local function trimmable(key, whole, head, size, upto, cutoff)
  local droppable = older_than(key, whole, head, size, upto, cutoff)
  return droppable >= 16 and 2 * droppable >= size
end

-- the same slots as a string of their own ('' if unreadable)
local function span(key, whole, from, count)
  local s, at = slots(key, whole, from, count)
  return s and s:sub(at + 1, at + SLOT * count) or ''
end

-- Decides one check of `cost` units at now for limit n and window_ms and, if commit and admissible,
-- records it. Returns the check's 4 results (admitted and recorded, admissible but not recorded, or
-- refused) and whether it is admissible. One function with locals: this runs for every request.
local function check(key, n, window_ms, now, commit, cost)
  local window = window_ms * 1000
  local size, head, gone, kept_gone, expires, widest_ms, whole, first = 0, 0, 0, 0, 0, window_ms, false, false
  local lagging, stored_gone, stored_widest = false, 0, 0
  -- a log of a limit up to WHOLE is read with one GET (a few hundred bytes), a larger one by header and slots
  local h
  if n <= WHOLE then
    h = redis.call('GET', key) or ''
  else
    h = redis.call('GETRANGE', key, 0, HEADER - 1)
  end
  if #h >= HEADER then
    local magic, h_head, h_size, h_gone, last, h_expires, h_widest = unpack(HEADER_FORMAT, h)
    if h_head == 0 and magic == LAGGING and h_size >= 1 then
      -- entries may have been appended after the header: the length counts them, the last is the newest
      local bytes = n <= WHOLE and #h or redis.call('STRLEN', key)
      local held = (bytes - HEADER) / SLOT
      if held > h_size and held == floor(held) then
        local s, at = slots(key, n <= WHOLE and h, held - 1, 1)
        if s then h_size, last = held, unpack('<d', s, at + 1) end
      end
    end
    if (magic == MAGIC or magic == LAGGING) and h_size >= 1 and h_head < h_size and h_gone <= h_size and h_widest >= 1
      and (n > WHOLE or #h == HEADER + SLOT * h_size) then
      lagging, stored_gone, stored_widest = magic == LAGGING, h_gone, h_widest
      head, size, expires, widest_ms = h_head, h_size, h_expires, max(h_widest, window_ms)
      -- the stored gone counts entries out of the widest window: out of this one too, if narrower
      if h_widest >= window_ms then gone, kept_gone = h_gone, h_gone end
      if n <= WHOLE then whole = h end
      now = max(now, last)
      if last <= now - window then gone = size end
    end
  end

  -- skip the entries that have left the window since the last check, oldest first (a log read
  -- whole is sliced in place; others are read by growing runs of slots)
  local cutoff, step = now - window, 8
  while gone < size and not first do
    local from = (head + gone) % size
    local count = min(step, size - gone, size - from)
    local s, at = slots(key, whole, from, count)
    if not s then
      size, head, gone = 0, 0, 0
      break
    end
    for j = 0, count - 1 do
      local stamp = unpack('<d', s, at + SLOT * j + 1)
      if stamp > cutoff then
        first = stamp
        break
      end
      gone = gone + 1
    end
    step = step * 4
  end
  local inside = size - gone
  if widest_ms == window_ms then kept_gone = gone end

  if inside + cost > n then
    -- never admissible (the caller refuses such a cost before asking): refused, no wait to promise
    if cost > n then return pack('<dddd', 0, max(0, n - inside), 0, 0), false end
    -- the (N - cost + 1)-th most recent unit is still inside: refused until it leaves
    local nth, at_nth = first, size - n + cost - 1
    if at_nth ~= gone then
      local s, at = slots(key, whole, (head + at_nth) % size, 1)
      nth = s and unpack('<d', s, at + 1) or 0
    end
    local wait = nth + window - now
    return pack('<dddd', 0, max(0, n - inside), ceil(wait / 1000), max(1, ceil(wait / 1000000))), false
  end
  if not commit then
    return pack('<dddd', 1, n - inside, first and ceil((first + window - now) / 1000) or 0, 0), true
  end

  -- record the admission at now, one entry per unit; a log read whole may take entries without a
  -- header write (LAGGING)
  local stamp, lifetime = pack('<d', now), LIFE * widest_ms * 1000
  if cost > 1 then stamp = string.rep(stamp, cost) end
  local refresh = expires < now + (LIFE - 1) * widest_ms * 1000
  if refresh then expires = now + lifetime end
  local written = n <= WHOLE and LAGGING or MAGIC
  -- entries a window up to twice the widest may still need are never dropped
  local horizon = now - (LIFE - 1) * widest_ms * 1000
  if size == 0 then
    redis.call('SET', key, pack(HEADER_FORMAT, written, 0, cost, 0, now, now + lifetime, widest_ms) .. stamp, 'PX', LIFE * widest_ms)
    refresh = false
  elseif size == n then
    -- full: the oldest `cost` entries have left (else refused); the new ones take their slots
    local tail = n - head
    if cost <= tail then
      redis.call('SETRANGE', key, HEADER + SLOT * head, stamp)
    else
      redis.call('SETRANGE', key, HEADER + SLOT * head, stamp:sub(1, SLOT * tail))
      redis.call('SETRANGE', key, HEADER, stamp:sub(SLOT * tail + 1))
    end
    redis.call('SETRANGE', key, 0, pack(HEADER_FORMAT, written, (head + cost) % n, n, max(0, kept_gone - cost), now, expires, widest_ms))
  elseif size + cost == n and head == 0 then
    -- the log becomes full: written once more as a new string, so APPEND's spare room is not kept
    local header = pack(HEADER_FORMAT, written, 0, n, kept_gone, now, now + lifetime, widest_ms)
    redis.call('SET', key, header .. span(key, whole, 0, size) .. stamp, 'PX', LIFE * widest_ms)
    refresh = false
  elseif size + cost < n and head == 0 and (kept_gone < 16 or 2 * kept_gone < size or size % 16 ~= 0
      or not trimmable(key, whole, head, size, kept_gone, horizon)) then
    -- (a trim is considered every 16th entry: its search reads up to log2(N) slots)
    redis.call('APPEND', key, stamp)
    -- the header is rewritten only when its gone has fallen LAG behind (each check scans from it),
    -- the key's expiry moves, the widest window grows, or it is not yet marked as lagging
    if not (whole and lagging and not refresh and kept_gone - stored_gone < LAG and stored_widest == widest_ms) then
      redis.call('SETRANGE', key, 0, pack(HEADER_FORMAT, written, 0, size + cost, kept_gone, now, expires, widest_ms))
    end
  else
    -- rewritten oldest-first with its newest entries (at most n - cost) that a window up to twice the
    -- widest may still need, and the new ones
    local keep = min(size - older_than(key, whole, head, size, kept_gone, horizon), n - cost)
    local header = pack(HEADER_FORMAT, written, 0, keep + cost, 0, now, now + lifetime, widest_ms)
    local from = (head + size - keep) % size
    local first_part = min(keep, size - from)
    local parts = { header }
    if first_part > 0 then parts[#parts + 1] = span(key, whole, from, first_part) end
    if keep > first_part then parts[#parts + 1] = span(key, whole, 0, keep - first_part) end
    parts[#parts + 1] = stamp
    local value = table.concat(parts)
    if #value ~= HEADER + SLOT * (keep + cost) then value = pack(HEADER_FORMAT, written, 0, cost, 0, now, now + lifetime, widest_ms) .. stamp end
    redis.call('SET', key, value, 'PX', LIFE * widest_ms)
    refresh = false
  end
  if refresh then redis.call('PEXPIRE', key, LIFE * widest_ms) end
  return pack('<dddd', 1, n - inside - cost, first and ceil((first + window - now) / 1000) or window_ms, 0), true
end

-- the cost of the check at place q of the reply
local function cost_of(q)
  return costs and costs[q] or 1
end

-- decides one request whose checks are KEYS[k + 1 .. k + c], rule indices at layout[at + 1 .. at + c]
local function request(k, c, layout, at, now, out, commit)
  local q = #out
  if c == 1 then
    local rule = byte(layout, at + 1)
    out[q + 1] = check(KEYS[k + 1], limits[rule], windows[rule], now, commit, costs and costs[q + 1] or 1)
    return
  end
  -- several scopes: all are decided first, and recorded (read again) only if every one admits
  local results, admitted = {}, true
  for j = 1, c do
    local rule = byte(layout, at + j)
    local result, admissible = check(KEYS[k + j], limits[rule], windows[rule], now, false, cost_of(q + j))
    results[j] = result
    if not admissible then admitted = false end
  end
  for j = 1, c do
    if admitted and commit then
      local rule = byte(layout, at + j)
      results[j] = check(KEYS[k + j], limits[rule], windows[rule], now, true, cost_of(q + j))
    end
    out[#out + 1] = results[j]
  end
end

-- the keys a request with shadow rules names: one per check, and one more for each shadow log
local function shadowed_keys(c, layout, at)
  local keys = c
  for j = 1, c do
    if byte(layout, at + 2 * j - 1) ~= NONE and byte(layout, at + 2 * j) ~= NONE then keys = keys + 1 end
  end
  return keys
end

-- decides one request with shadow rules (pairs at layout[at + 1 ..]): its enforced rules as
-- `request` does, then, only if admitted, each shadow rule on its own log, which records what
-- that rule alone would have admitted; a shadow refusal never changes the answer (marked 2)
local function shadowed(k, c, layout, at, now, out)
  local logs, shadow_logs, results, admitted, q = {}, {}, {}, true, #out
  for j = 1, c do
    local enforced, shadow = byte(layout, at + 2 * j - 1), byte(layout, at + 2 * j)
    k = k + 1
    logs[j] = KEYS[k]
    if enforced == NONE then
      shadow_logs[j] = KEYS[k]
    else
      if shadow ~= NONE then
        k = k + 1
        shadow_logs[j] = KEYS[k]
      end
      -- one check alone is recorded at once when admissible, as in `request`
      local result, admissible = check(logs[j], limits[enforced], windows[enforced], now, c == 1, cost_of(q + j))
      results[j] = result
      if not admissible then admitted = false end
    end
  end
  for j = 1, c do
    local enforced, shadow = byte(layout, at + 2 * j - 1), byte(layout, at + 2 * j)
    if admitted and enforced ~= NONE and c > 1 then
      results[j] = check(logs[j], limits[enforced], windows[enforced], now, true, cost_of(q + j))
    end
    if admitted and shadow ~= NONE then
      local result, admissible = check(shadow_logs[j], limits[shadow], windows[shadow], now, true, cost_of(q + j))
      if enforced == NONE then results[j] = admissible and result or result:sub(1, 24) .. pack('<d', 0) end
      if not admissible then results[j] = pack('<d', SHADOW_REFUSED) .. results[j]:sub(9) end
    elseif enforced == NONE then
      -- refused by another check: this one, in shadow, was not asked
      results[j] = pack('<dddd', 1, limits[shadow], 0, 0)
    end
    out[#out + 1] = results[j]
  end
end

for number in string.gmatch(ARGV[1], '%d+') do
  if #limits == #windows then limits[#limits + 1] = tonumber(number) else windows[#windows + 1] = tonumber(number) end
end
local layout = ARGV[2]
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
-- past the caller's deadline the caller has stopped waiting: decide and record nothing
local deadline = tonumber(ARGV[3]) or 0
if deadline > 0 and now > deadline then return pack('<dd', -2, now) end
local commit = ARGV[4] ~= '1'
if ARGV[5] and ARGV[5] ~= '' then
  costs = {}
  for number in string.gmatch(ARGV[5], '%d+') do costs[#costs + 1] = tonumber(number) end
end
local out, errors = {}, {}
local k, at = 0, 0
while at < #layout do
  local c, keys, bytes, ok, err = byte(layout, at + 1), 0, 0, true, nil
  local before = #out
  if c < PAIRED then
    keys, bytes = c, c
    ok, err = pcall(request, k, c, layout, at + 1, now, out, commit)
  else
    c = c - PAIRED
    keys, bytes = shadowed_keys(c, layout, at + 1), 2 * c
    ok, err = pcall(shadowed, k, c, layout, at + 1, now, out)
  end
  if not ok then
    for j = before + 1, before + c do out[j] = pack('<dddd', j == before + 1 and -1 or 0, 0, 0, 0) end
    errors[#errors + 1] = (string.gsub(type(err) == 'table' and (err.err or 'ERR throttle script') or tostring(err), '%s+', ' '))
  end
  k, at = k + keys, at + 1 + bytes
end
return table.concat(out) .. pack('<d', now) .. table.concat(errors, '\n')
