-- leave.lua: a waiter that gave up leaves the queue; if it was the head and
-- the lock (or a permit) is free, it may have been woken for it, so the next live waiter
-- is woken instead. (clock.lua, queue.lua and
-- waiting.lua come first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the waiter queue
-- KEYS[3]  the waiters' deadlines
-- KEYS[4]  the permits of an N-permit lock (see permits.lua)
-- ARGV[1]  the waiter id
-- ARGV[2]  the wake-up channel prefix
--
-- Returns 1 when the waiter was queued, 0 otherwise.
local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
redis.call('HDEL', KEYS[3], ARGV[1])
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if head == ARGV[1] and is_free(KEYS[1], KEYS[4]) then
  wake_head(KEYS[2], KEYS[3], ARGV[2])
end
return 1
