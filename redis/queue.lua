-- queue.lua: the waiter queue of one lock, and its wake-up (after
-- clock.lua); waiting.lua has the rest of the queue's functions.
--
-- Beside the lock key, in its hash slot: a sorted set of waiter ids scored
-- by arrival (server TIME in µs; ZADD NX keeps a waiter's place), and a
-- hash from waiter id to the server time in ms after which the entry is
-- stale (its waiter is no longer coming back: crashed, or cut off). A
-- waiter id is its Locker's id, a colon and a sequence number; each Locker
-- listens on the channel prefix .. Locker id, and a wake-up is the waiter
-- id published there.

-- wake_head publishes a wake-up to the first live waiter of the queue,
-- dropping at most 16 stale heads on the way (a bounded script), and
-- returns the waiter it woke, or false.
local function wake_head(queue, deadlines, chprefix)
  local now
  for _ = 1, 16 do
    local head = redis.call('ZRANGE', queue, '0', '0')[1]
    if not head then return false end
    now = now or math.floor(tonumber(time_us()) / 1000)
    if tonumber(redis.call('HGET', deadlines, head) or '0') >= now then
      redis.call('PUBLISH', chprefix .. string.match(head, '^[^:]*'), head)
      return head
    end
    redis.call('ZREM', queue, head)
    redis.call('HDEL', deadlines, head)
  end
  return false
end
