-- permit_release.lua: give a permit up, only if it is still held by the
-- caller, and wake the first live waiter of the lock's queue; inside its
-- minimum hold, leave it held until the hold ends. (clock.lua, signal.lua,
-- queue.lua and permits.lua come first.)
--
-- KEYS[1]  the lock key, KEYS[2] the waiter queue, KEYS[3] the waiters'
--          deadlines, KEYS[4] the permits, KEYS[5] their info, KEYS[6] the
--          fence key
-- ARGV[1]  the owner value
-- ARGV[2]  the wake-up channel prefix
-- ARGV[3]  the permit's token in decimal, or "" (a clean-up)
-- ARGV[4]  the minimum hold in ms, or "" for none
--
-- Returns 1 when released (or left to its minimum hold), 0 when the permit
-- is gone.
local now = now_ms(tonumber(time_us()))
local held = redis.call('GET', KEYS[1])
local score = tonumber(redis.call('ZSCORE', KEYS[4], ARGV[1]) or '0')
-- Without its '#' key (deleted by FLUSHALL, evicted) a permit is gone too.
if score <= now or not held or string.sub(held, 1, 1) ~= '#' then
  -- Gone. If the fence still holds this permit's token, nobody was granted
  -- a permit since: the same release ran before. Released, not lost.
  if ARGV[3] ~= '' and redis.call('GET', KEYS[6]) == ARGV[3] then return 1 end
  return 0
end
local info = redis.call('HGET', KEYS[5], ARGV[1]) or ''
local until_ = hold_end(string.match(info, '^(%d+)'), ARGV[4])
if until_ > now then
  redis.call('ZADD', KEYS[4], until_, ARGV[1])
else
  redis.call('ZREM', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
end
reclaim(KEYS[4], KEYS[5], now)
keep(KEYS[1], KEYS[4], KEYS[5], held)
if until_ <= now then
  signal(KEYS[1], 'released')
  wake_head(KEYS[2], KEYS[3], ARGV[2])
end
return 1
