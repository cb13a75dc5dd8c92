-- permit.lua: take one permit of an N-permit lock and hand out its fencing
-- token, atomically; or, for a waiter, keep its place in the lock's queue.
-- (clock.lua, signal.lua, take.lua, queue.lua, waiting.lua and permits.lua
-- come first.)
--
-- KEYS[1]  the lock key (holds '#' and N while any permit is held)
-- KEYS[2]  the fence key (shared by every permit: tokens of all permits
--          strictly increase)
-- KEYS[3]  the permits (sorted set: owner value -> expiry, server ms)
-- KEYS[4]  the permits' info (hash: owner value -> grant µs, token)
-- KEYS[5]  the waiter queue, KEYS[6] the waiters' deadlines (for a waiter)
-- ARGV[1]  the owner value
-- ARGV[2]  the permit's life on the server in ms: the later of TTL and
--          minimum hold
-- ARGV[3]  N, the limit
-- ARGV[4..7] for a waiter: the wake-up channel prefix, the waiter id, its
--          slack and its liveness, as for acquire.lua
--
-- Returns the token (an integer) when a permit is now held by ARGV[1];
-- {0, ms} when all N are held, ms until the first of them expires; {-1, M}
-- when the key is in use with another limit, M (1: a plain lock).
local now_s = time_us()
local us = tonumber(now_s)
local now = now_ms(us)
local mark = '#' .. ARGV[3]
local held = redis.call('GET', KEYS[1])
local waiter = ARGV[5]
local r
if held and held ~= mark then
  local c = string.sub(held, 1, 1)
  if c == '#' then return {-1, tonumber(string.sub(held, 2))} end
  if c ~= '~' then return {-1, 1} end
  -- A clean-up's placeholder: held by nobody, for a moment.
  r = {0, redis.call('PTTL', KEYS[1])}
else
  reclaim(KEYS[3], KEYS[4], now)
  local mine = redis.call('HGET', KEYS[4], ARGV[1])
  if mine then
    -- The same request ran twice (a client retry after a lost reply): the
    -- permit is ours already, with the token it was given.
    r = tonumber(string.match(mine, ' (%d+)$'))
  elseif redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) then
    r = {0, tonumber(redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')[2]) - now}
  end
end
if not r then
  local token = advance(KEYS[2], now_s)
  redis.call('HSET', KEYS[4], ARGV[1], now_s .. ' ' .. token)
  r = tonumber(token)
  signal(KEYS[1], 'granted')
end
if type(r) == 'table' then
  if waiter then enqueue(KEYS[5], KEYS[6], waiter, r[2], ARGV[6], ARGV[7]) end
  return r
end
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), ARGV[1])
keep(KEYS[1], KEYS[3], KEYS[4], mark)
-- A waiter took a permit: the next waiter is woken only if another permit
-- is free (no herd); otherwise its heartbeat tells it when one frees by
-- expiry, and a release wakes it.
if waiter then
  leave_queue(KEYS[5], KEYS[6], waiter)
  if redis.call('ZCARD', KEYS[3]) < tonumber(ARGV[3]) then wake_head(KEYS[5], KEYS[6], ARGV[4]) end
end
return r
