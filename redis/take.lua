-- take.lua: the grant of acquire.lua, grant.lua (Redlock) and permit.lua
-- (after clock.lua and signal.lua).

-- advance hands out the next fencing token of a lock (or a permit) and
-- stores it as the counter: max(counter + 1, now, hint), now the server
-- time in µs in decimal (time_us), hint a number or nil (see grant). It
-- returns the token as a number. The usual token is now itself, stored as
-- TIME gave it: only the rare others are formatted (%.0f: Lua's default
-- number formatting would write 1.7e+15).
local function advance(fence, now, hint)
  local token = now
  if hint and hint > tonumber(now) and hint <= tonumber(now) + 10000000 then
    token = string.format('%.0f', hint)
  end
  if redis.REDIS_VERSION_NUM then
    -- Redis 7: store the floor and read the previous token in one command;
    -- the counter wins only when two grants share a microsecond, or the
    -- clock stepped back.
    local last = redis.call('SET', fence, token, 'GET')
    if last and tonumber(last) >= tonumber(token) then
      token = string.format('%.0f', tonumber(last) + 1)
      redis.call('SET', fence, token)
    end
  else
    local last = tonumber(redis.call('GET', fence) or '0')
    if last >= tonumber(token) then token = string.format('%.0f', last + 1) end
    redis.call('SET', fence, token)
  end
  return tonumber(token)
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
-- client with a wild clock must not push the counter towards 2^53.
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
  local now = time_us()
  local token = advance(fence, now, hint)
  redis.call('SET', info, now .. ' ' .. value, 'PX', ttl)
  signal(lock, 'granted')
  return token
end
