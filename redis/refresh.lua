-- refresh.lua: extend a lock, only if it is still held by the caller.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner value, framed (see take.lua)
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the lock's minimum hold in ms (absent for none): the lock is
--          never set to end before it has passed since the grant
--
-- Returns 1 when extended, 0 when the lock is gone or held by another owner.
local held = redis.call('GET', KEYS[1])
if not held or string.sub(held, 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
local ttl = ARGV[2]
if ARGV[3] then
  -- TIME before a write: see clock.lua.
  if not redis.REDIS_VERSION_NUM and redis.replicate_commands then redis.replicate_commands() end
  local granted = tonumber(string.match(held, '^%d+', #ARGV[1] + 1))
  if granted then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    ttl = math.max(tonumber(ttl), math.floor(granted / 1000) + tonumber(ARGV[3]) - now)
  end
end
return redis.call('PEXPIRE', KEYS[1], ttl)
