-- queue.lua: the functions the scripts share (prepended to each of them
-- that needs one): the server clock, the watchers' signal, the grant of
-- acquire.lua and grant.lua, and the waiter queue of one lock.
--
-- Beside the lock key, in its hash slot: a sorted set of waiter ids scored
-- by arrival (server TIME in µs; ZADD NX keeps a waiter's place), and a
-- hash from waiter id to the server time in ms after which the entry is
-- stale (its waiter is no longer coming back: crashed, or cut off). A
-- waiter id is its Locker's id, a colon and a sequence number; each Locker
-- listens on the channel prefix .. Locker id, and a wake-up is the waiter
-- id published there.

-- TIME before a write is only allowed with effects replication: the default
-- since Redis 5, and needed on 3.2 and 4. Redis 7 (the first to set
-- REDIS_VERSION_NUM) dropped the rest; the call still costs a little there.
if not redis.REDIS_VERSION_NUM and redis.replicate_commands then redis.replicate_commands() end

local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- signal tells the watchers of a lock that it changed (what: granted,
-- released, published). Its channel is the lock key's name with ':ev' for
-- ':lock': in the lock's hash slot, where SPUBLISH (Redis 7) reaches only
-- the slot's shard of a Cluster, not every node as PUBLISH does.
local function signal(lock, what)
  local ch = string.sub(lock, 1, -6) .. ':ev'
  if redis.REDIS_VERSION_NUM then
    redis.call('SPUBLISH', ch, what)
  else
    redis.call('PUBLISH', ch, what)
  end
end

-- advance hands out the next fencing token of a lock (or a permit) and
-- stores it as the counter: max(counter + 1, now, hint), now the server
-- time in µs (see grant).
local function advance(fence, now, hint)
  local token = now
  if hint and hint > token and hint <= now + 10000000 then token = hint end
  if redis.REDIS_VERSION_NUM then
    -- Redis 7: store the floor and read the previous token in one command;
    -- the counter wins only when two grants share a microsecond, or the
    -- clock stepped back.
    local last = tonumber(redis.call('SET', fence, string.format('%.0f', token), 'GET') or '0')
    if last + 1 > token then
      token = last + 1
      redis.call('SET', fence, string.format('%.0f', token))
    end
  else
    local last = tonumber(redis.call('GET', fence) or '0')
    if last + 1 > token then token = last + 1 end
    redis.call('SET', fence, string.format('%.0f', token))
  end
  return token
end

-- grant takes lock (a string holding the owner value val, expiring in ttl
-- ms) and hands out its fencing token, atomically. It returns the token
-- (an integer, > 0) when the lock is now held by val, or {0, pttl, holder}
-- with the holder's remaining time to live in ms and its owner value.
--
-- The token is max(counter + 1, server time in µs, hint): the counter (the
-- fence key) keeps tokens strictly increasing while it lives, and the
-- clock floor keeps them above every earlier token when the counter is
-- lost (eviction, a restart without persistence). The hint (Redlock's, or
-- nil) counts only if it is at most 10 s ahead of this server's clock: a
-- client with a wild clock must not push the counter towards 2^53. Doubles
-- hold integers exactly up to 2^53: µs times stay below that until the
-- year 2255. %.0f: Lua's default number formatting would write 1.7e+15.
--
-- info, a string that lives as long as the lock, records for inspection
-- when the lock was granted (server TIME in µs), a space, and the
-- holder's published value: one SET with the lock's expiry.
local function grant(lock, fence, info, val, ttl, value, hint)
  -- SET NX first: the lock is usually free, and then one command takes it.
  if not redis.call('SET', lock, val, 'PX', ttl, 'NX') then
    -- Held. Time stands still within a script, so the key that refused the
    -- SET is still there.
    local held = redis.call('GET', lock)
    if held ~= val then
      return {0, redis.call('PTTL', lock), held}
    end
    -- The same request ran twice (a client retry after a lost reply): the
    -- lock is ours already, and nobody else was granted it since, so the
    -- fence still holds the token this request was given...
    redis.call('PEXPIRE', lock, ttl)
    redis.call('PEXPIRE', info, ttl)
    local given = redis.call('GET', fence)
    if given then return tonumber(given) end
    -- ...unless the fence was evicted meanwhile. That token is lost with it
    -- and was never delivered: hand out a new one, as for a fresh grant.
  end
  local now = now_us()
  local token = advance(fence, now, hint)
  redis.call('SET', info, string.format('%.0f', now) .. ' ' .. value, 'PX', ttl)
  signal(lock, 'granted')
  return token
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

-- enqueue puts waiter in the queue, keeping its place (ZADD NX), live for
-- ms: it tries again at the latest when the holder's PTTL ends (plus up
-- to a tenth of jitter), so until then and slack ms, or for the liveness
-- its heartbeats renew (liveness, absent for Redlock).
local function enqueue(queue, deadlines, waiter, pttl, slack, liveness)
  local live = math.floor(math.max(pttl, 0) * 1.1) + tonumber(slack)
  if liveness then live = tonumber(liveness) end
  local now = now_us()
  redis.call('ZADD', queue, 'NX', string.format('%.0f', now), waiter)
  redis.call('HSET', deadlines, waiter, string.format('%.0f', math.floor(now / 1000) + live))
  stretch(queue, live)
  stretch(deadlines, live)
end

-- is_free reports whether a waiter could take the lock now: its key is
-- gone, or it is an N-permit lock ('#' and N, see permits.lua) with fewer
-- than N permits live in sem.
local function is_free(lock, sem)
  local held = redis.call('GET', lock)
  if not held then return true end
  if string.sub(held, 1, 1) ~= '#' then return false end
  local now = math.floor(now_us() / 1000)
  return redis.call('ZCOUNT', sem, '(' .. now, '+inf') < tonumber(string.sub(held, 2))
end
