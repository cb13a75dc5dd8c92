-- guard.lua: admit a fenced operation and perform its write atomically.
--
-- KEYS[1]  the guard's fence key (the highest token admitted)
-- KEYS[2]  the guarded value key (same hash slot)
-- ARGV[1]  the token, in decimal without leading zeros
-- ARGV[2]  "1" to write ARGV[3] to KEYS[2], "0" to admit only
-- ARGV[3]  the value
--
-- Returns {1, token} when admitted (and written), {0, highest} when the token
-- is lower than the highest admitted. Tokens are compared as decimal strings,
-- so every uint64 compares exactly (Lua numbers are doubles).
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local highest = redis.call('GET', KEYS[1]) or '0'
if less(ARGV[1], highest) then
  return {0, highest}
end
if highest ~= ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1])
end
if ARGV[2] == '1' then
  redis.call('SET', KEYS[2], ARGV[3])
end
return {1, ARGV[1]}
