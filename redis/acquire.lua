-- acquire.lua: take a lock and hand out its fencing token, atomically; or,
-- for a waiter, keep its place in the lock's queue. (queue.lua comes first.)
--
-- KEYS[1]  the lock key (a string holding the owner value)
-- KEYS[2]  the fence key (the last token handed out for this lock; same hash slot)
-- KEYS[3]  the waiter queue (sorted set: waiter id -> arrival, µs)
-- KEYS[4]  the waiters' deadlines (hash: waiter id -> stale after, ms)
-- ARGV[1]  the owner value (owner id, a space, the holder label)
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the wake-up channel prefix
-- ARGV[4]  the waiter id; absent for an attempt that does not queue
-- ARGV[5]  with ARGV[4], the waiter's slack in ms: its entry is stale once
--          the holder's PTTL, plus a tenth, plus this, has passed without a
--          new attempt
--
-- Returns {1, token} when the lock is now held by ARGV[1], or {0, pttl, holder}
-- with the remaining time to live of the holder's lock in milliseconds and the
-- holder's owner value (Redlock tells a majority holder from a split by it).

local waiter = ARGV[4]
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  -- The same request ran twice (a client retry after a lost reply): the lock
  -- is ours already, and the fence still holds the token it was given.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, tonumber(redis.call('GET', KEYS[2]) or '0')}
end
if held then
  local pttl = redis.call('PTTL', KEYS[1])
  if waiter then
    -- The waiter tries again at the latest when the holder's lock expires
    -- (plus up to a tenth of jitter): until then, and a slack, it is live.
    local live = math.floor(math.max(pttl, 0) * 1.1) + tonumber(ARGV[5])
    local now = now_us()
    redis.call('ZADD', KEYS[3], 'NX', string.format('%.0f', now), waiter)
    redis.call('HSET', KEYS[4], waiter, string.format('%.0f', math.floor(now / 1000) + live))
    stretch(KEYS[3], live)
    stretch(KEYS[4], live)
  end
  return {0, pttl, held}
end

redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])

-- The token is max(counter + 1, server time in microseconds): the counter
-- keeps tokens strictly increasing while it lives, and the clock floor keeps
-- them above every earlier token when the counter is lost (eviction, a
-- restart without persistence). Doubles hold integers exactly up to 2^53:
-- microsecond times stay below that until the year 2255.
local token = now_us()
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last + 1 > token then token = last + 1 end
-- %.0f: Lua's default number formatting would write 1.7e+15.
redis.call('SET', KEYS[2], string.format('%.0f', token))

-- The lock changed hands: the queue's head (if any) learns it, tries, and
-- so waits for this holder's PTTL rather than the one it last saw.
if waiter then leave_queue(KEYS[3], KEYS[4], waiter) end
wake_head(KEYS[3], KEYS[4], ARGV[3])
return {1, token}
