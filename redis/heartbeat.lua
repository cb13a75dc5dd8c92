-- heartbeat.lua: a waiter that is still waiting keeps its queue entry live,
-- and learns whether it should try now. (clock.lua, queue.lua and
-- waiting.lua come first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the waiter queue
-- KEYS[3]  the waiters' deadlines
-- KEYS[4]  the permits of an N-permit lock (see permits.lua)
-- ARGV[1]  the waiter id
-- ARGV[2]  the entry's liveness in ms: it is stale if not renewed by then
--
-- Returns 1 when the lock (or a permit) is free and this waiter is the first live waiter
-- (its wake-up went to a head that died, or was lost): it tries now; -1 when
-- it is no longer queued (judged stale): it tries now, and queues again;
-- 0 otherwise: it keeps waiting. Only the head is told to try, so a dead
-- head costs the queue one liveness period, not a herd.
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  return -1
end
local now = math.floor(tonumber(time_us()) / 1000)
redis.call('HSET', KEYS[3], ARGV[1], string.format('%.0f', now + tonumber(ARGV[2])))
stretch(KEYS[2], tonumber(ARGV[2]))
stretch(KEYS[3], tonumber(ARGV[2]))
if not is_free(KEYS[1], KEYS[4]) then
  return 0
end
for _ = 1, 16 do
  local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if head == ARGV[1] then return 1 end
  if not head or tonumber(redis.call('HGET', KEYS[3], head) or '0') >= now then
    return 0
  end
  leave_queue(KEYS[2], KEYS[3], head)
end
return 0
