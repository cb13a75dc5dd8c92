-- release.lua: delete a lock, only if it is still held by the caller, and
-- wake the first live waiter of its queue. (queue.lua comes first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the waiter queue
-- KEYS[3]  the waiters' deadlines
-- ARGV[1]  the owner value
-- ARGV[2]  the wake-up channel prefix, or "" to release without waking
--          anyone (the undo of a failed Redlock round: nobody waited for it)
--
-- Returns 1 when released, 0 when the lock is gone or held by another owner.
-- The fence key is left alone on purpose: it must outlive the lock, or the
-- next holder's token could repeat this one.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  if ARGV[2] ~= '' then
    wake_head(KEYS[2], KEYS[3], ARGV[2])
  end
  return 1
end
return 0
