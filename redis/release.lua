-- release.lua: delete a lock, only if it is still held by the caller, and
-- wake the first live waiter of its queue. (clock.lua, signal.lua and
-- queue.lua come first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the waiter queue
-- KEYS[3]  the waiters' deadlines
-- KEYS[4]  the fence key
-- ARGV[1]  the owner value, framed (see take.lua)
-- ARGV[2]  the wake-up channel prefix, or "" to release without waking
--          anyone (the undo of a failed Redlock round: nobody waited for it)
-- ARGV[3]  the lease's token in decimal, or "" (absent for Redlock)
-- ARGV[4]  for the clean-up of an acquire whose outcome is unknown: how
--          long, in ms, a lock found free is kept from that acquire, should
--          it still land ("" or absent otherwise)
-- ARGV[5]  the lock's minimum hold in ms (absent for none): a release
--          before it has passed since the grant (the grant time the lock
--          key holds) leaves the lock held until then, and wakes nobody
--
-- Returns 1 when released, 0 when the lock is gone or held by another owner.
-- The fence key is left alone on purpose: it must outlive the lock, or the
-- next holder's token could repeat this one.
local val = ARGV[1]
local held = redis.call('GET', KEYS[1])
if held and string.sub(held, 1, #val) == val then
  if ARGV[5] then
    local granted = tonumber(string.match(held, '^%d+', #val + 1))
    local left = granted and math.floor(granted / 1000) + tonumber(ARGV[5]) - math.floor(tonumber(time_us()) / 1000)
    if left and left > 0 then
      redis.call('PEXPIRE', KEYS[1], left)
      return 1
    end
  end
  redis.call('DEL', KEYS[1])
  signal(KEYS[1], 'released')
  if ARGV[2] ~= '' then
    wake_head(KEYS[2], KEYS[3], ARGV[2])
  end
  return 1
end
if not held then
  -- The same release ran before (a client retry after a lost reply): the
  -- lock is gone and nobody was granted it since, so the fence still holds
  -- this lease's token. Released, not lost.
  if ARGV[3] and ARGV[3] ~= '' and redis.call('GET', KEYS[4]) == ARGV[3] then
    return 1
  end
  -- A clean-up that finds the lock free: the acquire it cleans up after may
  -- still be on its way. A value no owner has keeps it from taking the lock.
  if ARGV[4] and ARGV[4] ~= '' then
    redis.call('SET', KEYS[1], '~' .. val, 'PX', ARGV[4], 'NX')
  end
end
return 0
