-- inspect.lua: what one server knows of a lock, read in one atomic step.
-- (clock.lua comes first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence key
-- KEYS[3]  the waiter queue (unused: the deadlines tell the live entries)
-- KEYS[4]  the waiters' deadlines
-- KEYS[5]  the permits of an N-permit lock, KEYS[5] their info
--
-- Returns {holder, pttl, token, granted, value, waiters}: the owner value
-- (framed, see take.lua; the whole value when it has no frame; "" when
-- free), the lock's PTTL in ms, the fence ("" if none), the grant time in
-- µs and the published value the lock key holds ("" if none), and how
-- many queue entries are live (not yet stale). An N-permit lock shows the
-- live permit that expires last (its owner value and grant time), the
-- lock's PTTL (until the last permit ends) and the fence (the latest
-- token of any permit); it has no published value.
local now = math.floor(tonumber(time_us()) / 1000)
local waiters = 0
for _, d in ipairs(redis.call('HVALS', KEYS[4])) do
  if tonumber(d) >= now then waiters = waiters + 1 end
end
local held = redis.call('GET', KEYS[1])
if not held then
  return {'', -2, '', '', '', waiters}
end
local granted, value = '', ''
if string.sub(held, 1, 1) == '#' then
  local last = redis.call('ZRANGE', KEYS[5], -1, -1)[1]
  if not last or tonumber(redis.call('ZSCORE', KEYS[5], last)) <= now then
    return {'', -2, '', '', '', waiters}
  end
  granted = string.match(redis.call('HGET', KEYS[6], last) or '', '^(%d+)') or ''
  return {last, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '', granted, '', waiters}
end
local n = string.match(held, '^(%d+):')
if n then
  local cut = #n + 1 + tonumber(n)
  granted, value = string.match(held, '^(%d*) (.*)$', cut + 1)
  held = string.sub(held, 1, cut)
end
return {held, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or '', granted or '', value or '', waiters}
