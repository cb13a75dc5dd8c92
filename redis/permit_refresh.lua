-- permit_refresh.lua: extend a permit, only if it is still held by the
-- caller, never to end before its minimum hold. (clock.lua and permits.lua
-- come first.)
--
-- KEYS[1]  the lock key, KEYS[2] the permits, KEYS[3] their info
-- ARGV[1]  the owner value
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the minimum hold in ms, or "" for none
--
-- Returns 1 when extended, 0 when the permit is gone.
local now = now_ms(tonumber(time_us()))
local held = redis.call('GET', KEYS[1])
local score = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
if score <= now or not held or string.sub(held, 1, 1) ~= '#' then return 0 end
local info = redis.call('HGET', KEYS[3], ARGV[1]) or ''
local expiry = math.max(now + tonumber(ARGV[2]), hold_end(string.match(info, '^(%d+)'), ARGV[3]))
redis.call('ZADD', KEYS[2], expiry, ARGV[1])
keep(KEYS[1], KEYS[2], KEYS[3], held)
return 1
