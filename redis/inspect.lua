-- inspect.lua: what one server knows of a lock, read in one atomic step.
-- (queue.lua comes first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence key
-- KEYS[3]  the lock's info
-- KEYS[4]  the waiter queue (unused: the deadlines tell the live entries)
-- KEYS[5]  the waiters' deadlines
--
-- Returns {holder, pttl, token, granted, value, waiters}: the owner value
-- ("" when free), the lock's PTTL in ms, the fence ("" if none), the grant
-- time in µs and the published value from the info ("" if none), and how
-- many queue entries are live (not yet stale).
local now = math.floor(now_us() / 1000)
local waiters = 0
for _, d in ipairs(redis.call('HVALS', KEYS[5])) do
  if tonumber(d) >= now then waiters = waiters + 1 end
end
local held = redis.call('GET', KEYS[1])
if not held then
  return {'', -2, '', '', '', waiters}
end
local granted, value = '', ''
local info = redis.call('GET', KEYS[3])
if info then granted, value = string.match(info, '^(%d*) (.*)$') end
return {held, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '', granted or '', value or '', waiters}
