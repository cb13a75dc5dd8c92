-- take.lua: the grant of acquire.lua, grant.lua (Redlock) and permit.lua
-- (after clock.lua and signal.lua).

-- advance hands out the next fencing token of a lock (or a permit) and
-- stores it as the counter: max(counter + 1, now, hint), now the server
-- time in µs in decimal (time_us), hint a number or nil (see grant). It
-- returns the token in decimal. The usual token is now itself, stored and
-- compared as TIME gave it: strtod and string.format('%.0f') on 16-digit
-- numbers cost more than the rest of a grant's Lua, so only the rare
-- other tokens go through numbers (%.0f: Lua's default number formatting
-- would write 1.7e+15).
local function advance(fence, now, hint)
  local token = now
  if hint and hint > tonumber(now) and hint <= tonumber(now) + 10000000 then
    token = string.format('%.0f', hint)
  end
  local last
  if redis.REDIS_VERSION_NUM then
    -- Redis 7: store the floor and read the previous token in one command;
    -- the counter wins only when two grants share a microsecond, or the
    -- clock stepped back.
    last = redis.call('SET', fence, token, 'GET')
  else
    last = redis.call('GET', fence)
  end
  -- Decimals without leading zeros: the longer is the larger, and digits
  -- of equal length compare as strings.
  if last and (#last > #token or #last == #token and last >= token) then
    token = string.format('%.0f', tonumber(last) + 1)
    redis.call('SET', fence, token)
  elseif not redis.REDIS_VERSION_NUM then
    redis.call('SET', fence, token)
  end
  return token
end

-- A lock key holds its owner value framed (its length, a colon, the
-- value), then the grant's server time in µs, a space, and the holder's
-- published value: "41:<owner id> <label>1764558000123456 <value>". The
-- frame makes the owner value a prefix no other owner's value starts with
-- (the owner id is random), so refresh and release compare that prefix;
-- the rest is for inspection and the minimum hold, kept in the same key so
-- that a grant is one SET. Values without a frame are not owner values:
-- '#' and N (an N-permit lock, permits.lua) and '~' and a frame (a
-- clean-up's placeholder, release.lua).

-- grant takes lock (a string holding the framed owner value val, expiring
-- in ttl ms) and hands out its fencing token, atomically. It returns the
-- token (in decimal, > 0) when the lock is now held by val, or {0, pttl,
-- holder} with the holder's remaining time to live in ms and its owner
-- value (framed; the whole value when it has no frame).
--
-- The token is max(counter + 1, server time in µs, hint): the counter (the
-- fence key) keeps tokens strictly increasing while it lives, and the
-- clock floor keeps them above every earlier token when the counter is
-- lost (eviction, a restart without persistence). The hint (Redlock's, or
-- nil) counts only if it is at most 10 s ahead of this server's clock: a
-- client with a wild clock must not push the counter towards 2^53.
local function grant(lock, fence, val, ttl, value, hint)
  local now = time_us()
  -- SET NX first: the lock is usually free, and then one command takes it.
  if not redis.call('SET', lock, val .. now .. ' ' .. value, 'PX', ttl, 'NX') then
    -- Held. Time stands still within a script, so the key that refused the
    -- SET is still there.
    local held = redis.call('GET', lock)
    if string.sub(held, 1, #val) ~= val then
      local n = string.match(held, '^(%d+):')
      if n then held = string.sub(held, 1, #n + 1 + tonumber(n)) end
      return {0, redis.call('PTTL', lock), held}
    end
    -- The same request ran twice (a client retry after a lost reply): the
    -- lock is ours already, and nobody else was granted it since, so the
    -- fence still holds the token this request was given...
    redis.call('PEXPIRE', lock, ttl)
    local given = redis.call('GET', fence)
    if given then return given end
    -- ...unless the fence was evicted meanwhile. That token is lost with it
    -- and was never delivered: hand out a new one, as for a fresh grant.
  end
  local token = advance(fence, now, hint)
  signal(lock, 'granted')
  return token
end
