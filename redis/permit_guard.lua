-- permit_guard.lua: write a value only if the permit (or lock) that was
-- granted a token is still held, checked and written in one step.
-- (clock.lua comes first, for time_us.)
--
-- KEYS[1]  the lock key ('#' and N for an N-permit lock, else the owner)
-- KEYS[2]  the fence key (the last token granted)
-- KEYS[3]  the permits (sorted set: owner value -> expiry, server ms)
-- KEYS[4]  the permits' info (hash: owner value -> grant µs, token)
-- KEYS[5]  the value the guard writes (same hash slot)
-- ARGV[1]  the token, in decimal without leading zeros
-- ARGV[2]  the value
--
-- Returns 1 when written, 0 when the permit is not held. Tokens are
-- compared as decimal strings, so every uint64 compares exactly.
local held = redis.call('GET', KEYS[1])
if not held then return 0 end
local c = string.sub(held, 1, 1)
local ok = false
if c == '#' then
  -- A permit is held while its entry has not expired by the server's
  -- clock: an expired entry stays until a script reclaims it.
  local now = math.floor(tonumber(time_us()) / 1000)
  local info = redis.call('HGETALL', KEYS[4])
  for i = 1, #info, 2 do
    if string.match(info[i + 1], ' (%d+)$') == ARGV[1] then
      local expiry = redis.call('ZSCORE', KEYS[3], info[i])
      ok = expiry ~= false and tonumber(expiry) > now
      break
    end
  end
elseif c ~= '~' then
  -- A plain lock: every grant advances the fence, so its holder is the
  -- grant of the fence's token.
  ok = redis.call('GET', KEYS[2]) == ARGV[1]
end
if not ok then return 0 end
redis.call('SET', KEYS[5], ARGV[2])
return 1
