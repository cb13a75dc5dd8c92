-- waiting.lua: a waiter's entry in the queue (after clock.lua and
-- queue.lua).

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
  local now = time_us()
  redis.call('ZADD', queue, 'NX', now, waiter)
  redis.call('HSET', deadlines, waiter, string.format('%.0f', math.floor(tonumber(now) / 1000) + live))
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
  local now = math.floor(tonumber(time_us()) / 1000)
  return redis.call('ZCOUNT', sem, '(' .. now, '+inf') < tonumber(string.sub(held, 2))
end
