-- acquire.lua: take a lock and hand out its fencing token, atomically.
--
-- KEYS[1]  the lock key (a string holding the owner value)
-- KEYS[2]  the fence key (the last token handed out for this lock; same hash slot)
-- ARGV[1]  the owner value (owner id, a space, the holder label)
-- ARGV[2]  the TTL in milliseconds
--
-- Returns {1, token} when the lock is now held by ARGV[1], or {0, pttl, holder}
-- with the remaining time to live of the holder's lock in milliseconds and the
-- holder's owner value (Redlock tells a majority holder from a split by it).

-- TIME before a write is only allowed with effects replication: the default
-- since Redis 5, and a no-op there; needed on 3.2 and 4.
if redis.replicate_commands then redis.replicate_commands() end

local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  -- The same request ran twice (a client retry after a lost reply): the lock
  -- is ours already, and the fence still holds the token it was given.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if held then
  return {0, redis.call('PTTL', KEYS[1]), held}
end

redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])

-- The token is max(counter + 1, server time in microseconds): the counter
-- keeps tokens strictly increasing while it lives, and the clock floor keeps
-- them above every earlier token when the counter is lost (eviction, a
-- restart without persistence). Doubles hold integers exactly up to 2^53:
-- microsecond times stay below that until the year 2255.
local t = redis.call('TIME')
local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last + 1 > token then token = last + 1 end
-- %.0f: Lua's default number formatting would write 1.7e+15.
redis.call('SET', KEYS[2], string.format('%.0f', token))
return {1, token}
