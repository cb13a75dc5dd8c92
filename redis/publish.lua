-- publish.lua: replace the holder's published value, only if the lock is
-- still held by the caller, and tell the lock's watchers. (signal.lua comes
-- first.)
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner value, framed (see take.lua)
-- ARGV[2]  the value
--
-- Returns 1 when published, 0 when the lock is gone or held by another owner.
local held = redis.call('GET', KEYS[1])
if not held or string.sub(held, 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
-- The owner value and the grant time stay, and so does the expiry.
local kept = ARGV[1] .. (string.match(held, '^%d*', #ARGV[1] + 1) or '') .. ' ' .. ARGV[2]
if redis.REDIS_VERSION_NUM then
  redis.call('SET', KEYS[1], kept, 'KEEPTTL')
else
  redis.call('SET', KEYS[1], kept, 'PX', math.max(redis.call('PTTL', KEYS[1]), 1))
end
signal(KEYS[1], 'published')
return 1
