-- permits.lua: the functions the N-permit scripts share (after clock.lua).
--
-- An N-permit lock keeps, in the lock's hash slot: the lock key holding '#'
-- and N (the limit, stored with the key: a plain lock's SET NX fails on
-- it, and an acquisition asking another limit is refused), a sorted set of
-- the holders' owner values scored by when each permit expires (server
-- time, ms), and a hash from owner value to its grant time (µs), a space,
-- and its token. All three live as long as the last permit.

local function now_ms(us) return math.floor(us / 1000) end

-- reclaim drops the permits that expired by now (ms).
local function reclaim(sem, sinfo, now)
  local gone = redis.call('ZRANGEBYSCORE', sem, '-inf', now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)
    redis.call('HDEL', sinfo, unpack(gone))
  end
end

-- keep makes the lock key (holding mark, '#' and N) and the permits live
-- until the last permit expires, or deletes them when none is left.
local function keep(lock, sem, sinfo, mark)
  local last = redis.call('ZRANGE', sem, -1, -1, 'WITHSCORES')[2]
  if not last then
    redis.call('DEL', lock, sem, sinfo)
    return
  end
  redis.call('SET', lock, mark)
  redis.call('PEXPIREAT', lock, last)
  redis.call('PEXPIREAT', sem, last)
  redis.call('PEXPIREAT', sinfo, last)
end

-- hold_end is when the minimum hold (ms, or '' for none) of a permit that
-- was granted at granted µs ends, in server ms; 0 when it has none.
local function hold_end(granted, minhold)
  if not minhold or minhold == '' or not granted then return 0 end
  return now_ms(tonumber(granted)) + tonumber(minhold)
end
