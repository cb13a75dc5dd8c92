-- release.lua: delete a lock, only if it is still held by the caller, and
-- wake the waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the owner value
-- ARGV[2]  the wake-up channel, or "" to release without waking anyone (the
--          undo of a failed Redlock round: nobody waited long for it)
-- ARGV[3]  the wake-up message (the encoded key and the owner id)
--
-- Returns 1 when released, 0 when the lock is gone or held by another owner.
-- The fence key is left alone on purpose: it must outlive the lock, or the
-- next holder's token could repeat this one.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then
    redis.call('PUBLISH', ARGV[2], ARGV[3])
  end
  return 1
end
return 0
