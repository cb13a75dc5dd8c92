-- refresh.lua: extend a lock, only if it is still held by the caller.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the lock's info (lives as long as the lock)
-- ARGV[1]  the owner value
-- ARGV[2]  the TTL in milliseconds
--
-- Returns 1 when extended, 0 when the lock is gone or held by another owner.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
