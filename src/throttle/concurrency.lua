--[[
  Admits one request among a client's requests in progress in one scope, only while fewer than
  the limit are, atomically and in Redis's clock (docs/throttling.md "Concurrency limits").

  Input:
    KEYS[1]  the client's requests in progress in the scope: a sorted set, request id → the moment
             its entry stops counting (ms of Redis's clock)
    ARGV[1]  the request's id, unique across processes and hosts
    ARGV[2]  the limit N (decimal)
    ARGV[3]  how long an entry counts at most, in ms (decimal): the entry of a request its process
             never ends (the process was killed) stops counting after it

  Output: { admitted (1/0), the entries counted now, this request's among them when admitted }

  Entries past their moment are dropped first; the request that ends removes its own (ZREM).
  The key's expiry is kept at or past its latest entry's, so the key goes with its last entry.
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local key, limit, life = KEYS[1], tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.0f', now))
local held = redis.call('ZCARD', key)
if held >= limit then return { 0, held } end
redis.call('ZADD', key, string.format('%.0f', now + life), ARGV[1])
if redis.call('PTTL', key) < life then redis.call('PEXPIRE', key, life) end
return { 1, held + 1 }
