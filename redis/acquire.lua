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
-- ARGV[4]  the waiter id
-- ARGV[5]  the waiter's slack in ms: its entry is stale once the holder's
--          PTTL, plus a tenth, plus this, has passed without a new attempt
-- ARGV[6]  instead of that, for a waiter that renews its entry by
--          heartbeat.lua: the entry's liveness in ms (absent for Redlock)
--
-- An attempt that does not queue sends only KEYS[1..2] and ARGV[1..2], and
-- touches nothing else.
--
-- Returns the token (an integer, > 0) when the lock is now held by ARGV[1], or
-- {0, pttl, holder} with the remaining time to live of the holder's lock in
-- milliseconds and the holder's owner value (Redlock tells a majority holder
-- from a split by it). A grant is a bare integer rather than an array: it is
-- the reply of every uncontended acquire, and an integer is the cheapest to
-- send and to read.

local waiter = ARGV[4]
-- SET NX first: the lock is usually free, and then one command takes it.
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  -- Held. Time stands still within a script, so the key that refused the
  -- SET is still there.
  local held = redis.call('GET', KEYS[1])
  if held ~= ARGV[1] then
    local pttl = redis.call('PTTL', KEYS[1])
    if waiter then
      -- The waiter tries again at the latest when the holder's lock expires
      -- (plus up to a tenth of jitter): until then, and a slack, it is live.
      local live = math.floor(math.max(pttl, 0) * 1.1) + tonumber(ARGV[5])
      if ARGV[6] then live = tonumber(ARGV[6]) end
      local now = now_us()
      redis.call('ZADD', KEYS[3], 'NX', string.format('%.0f', now), waiter)
      redis.call('HSET', KEYS[4], waiter, string.format('%.0f', math.floor(now / 1000) + live))
      stretch(KEYS[3], live)
      stretch(KEYS[4], live)
    end
    return {0, pttl, held}
  end
  -- The same request ran twice (a client retry after a lost reply): the
  -- lock is ours already, and nobody else was granted it since, so the
  -- fence still holds the token this request was given...
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local given = redis.call('GET', KEYS[2])
  if given then return tonumber(given) end
  -- ...unless the fence was evicted meanwhile. That token is lost with it
  -- and was never delivered: hand out a new one, as for a fresh grant.
end

-- The token is max(counter + 1, server time in microseconds): the counter
-- keeps tokens strictly increasing while it lives, and the clock floor keeps
-- them above every earlier token when the counter is lost (eviction, a
-- restart without persistence). Doubles hold integers exactly up to 2^53:
-- microsecond times stay below that until the year 2255. %.0f: Lua's default
-- number formatting would write 1.7e+15.
local token = now_us()
local last
if redis.REDIS_VERSION_NUM then
  -- Redis 7: store the clock floor and read the previous token in one
  -- command; the counter wins only when two grants share a microsecond, or
  -- the clock stepped back.
  last = tonumber(redis.call('SET', KEYS[2], string.format('%.0f', token), 'GET') or '0')
  if last + 1 > token then
    token = last + 1
    redis.call('SET', KEYS[2], string.format('%.0f', token))
  end
else
  last = tonumber(redis.call('GET', KEYS[2]) or '0')
  if last + 1 > token then token = last + 1 end
  redis.call('SET', KEYS[2], string.format('%.0f', token))
end

-- A waiter took the lock: the next waiter in the queue is the head now, and
-- still waits for the PTTL of the holder it last saw, which may be far longer
-- than this holder's; woken, it tries and learns this holder's PTTL. An
-- attempt from outside the queue needs no such wake-up: it can only take a
-- lock whose holder released it (which woke the head) or let it expire
-- (when the head's own wait ends), and the head's next try sees it.
if waiter then
  leave_queue(KEYS[3], KEYS[4], waiter)
  wake_head(KEYS[3], KEYS[4], ARGV[3])
end
return token
