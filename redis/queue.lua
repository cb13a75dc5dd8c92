-- queue.lua: the waiter queue of one lock, shared by acquire.lua,
-- release.lua and leave.lua (prepended to each of them).
--
-- Beside the lock key, in its hash slot: a sorted set of waiter ids scored
-- by arrival (server TIME in µs; ZADD NX keeps a waiter's place), and a hash
-- from waiter id to the server time in ms after which the entry is stale
-- (its waiter is no longer coming back: crashed, or cut off). A waiter id is
-- its Locker's id, a colon and a sequence number; each Locker listens on the
-- channel prefix .. Locker id, and a wake-up is the waiter id published there.

-- TIME before a write is only allowed with effects replication: the default
-- since Redis 5, and needed on 3.2 and 4. Redis 7 (the first to set
-- REDIS_VERSION_NUM) dropped the rest; the call still costs a little there.
if not redis.REDIS_VERSION_NUM and redis.replicate_commands then redis.replicate_commands() end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- wake_head publishes a wake-up to the first live waiter of the queue,
-- dropping at most 16 stale heads on the way (a bounded script), and
-- returns the waiter it woke, or false.
local function wake_head(queue, deadlines, chprefix)
  local now
  for _ = 1, 16 do
    local head = redis.call('ZRANGE', queue, 0, 0)[1]
    if not head then return false end
    now = now or math.floor(now_us() / 1000)
    if tonumber(redis.call('HGET', deadlines, head) or '0') >= now then
      redis.call('PUBLISH', chprefix .. string.match(head, '^[^:]*'), head)
      return head
    end
    redis.call('ZREM', queue, head)
    redis.call('HDEL', deadlines, head)
  end
  return false
end

-- leave_queue removes a waiter (it holds the lock now, or gave up).
local function leave_queue(queue, deadlines, id)
  redis.call('ZREM', queue, id)
  redis.call('HDEL', deadlines, id)
end

-- stretch makes key live at least ms more (never shortens it: another
-- waiter may need longer).
local function stretch(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
