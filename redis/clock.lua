-- clock.lua: the server clock, for every script that reads it (prepended
-- to each). The scripts are assembled from the libraries they use
-- (scripts.go): every function a script defines costs a closure on each
-- run, used or not.

-- TIME before a write is only allowed with effects replication: the default
-- since Redis 5, and needed on 3.2 and 4. Redis 7 (the first to set
-- REDIS_VERSION_NUM) dropped the rest; the call still costs a little there.
if not redis.REDIS_VERSION_NUM and redis.replicate_commands then redis.replicate_commands() end

-- time_us is the server time in µs, in decimal: TIME's seconds and its
-- microseconds padded to six digits, joined without formatting a double
-- (string.format('%.0f') costs more than the rest of a grant's Lua).
-- tonumber gives the number: doubles hold integers exactly up to 2^53, and
-- µs times stay below that until the year 2255.
local function time_us()
  local t = redis.call('TIME')
  return t[1] .. string.sub('00000', #t[2]) .. t[2]
end
