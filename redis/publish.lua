-- publish.lua: replace the holder's published value, only if the lock is
-- still held by the caller, and tell the lock's watchers. (queue.lua comes
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
redis.call('HSET', KEYS[2], 'v', ARGV[2])
-- The info lives as long as the lock (a lock granted before there was
-- info gets one here, which must not outlive it).
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 then redis.call('PEXPIRE', KEYS[2], pttl) end
signal(KEYS[1], 'published')
return 1
