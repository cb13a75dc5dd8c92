-- publish.lua: replace the holder's published value, only if the lock is
-- still held by the caller, and tell the lock's watchers. (signal.lua comes
-- first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's info
-- ARGV[1]  the owner value
-- ARGV[2]  the value
--
-- Returns 1 when published, 0 when the lock is gone or held by another owner.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
-- The grant time stays; the info lives as long as the lock (a lock
-- granted before there was info gets one, without a grant time).
local info = redis.call('GET', KEYS[2]) or ''
local granted = string.match(info, '^%d*') or ''
redis.call('SET', KEYS[2], granted .. ' ' .. ARGV[2], 'PX', math.max(redis.call('PTTL', KEYS[1]), 1))
signal(KEYS[1], 'published')
return 1
