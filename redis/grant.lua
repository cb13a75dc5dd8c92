-- grant.lua (Redlock): an attempt that does not queue. Take the lock and
-- propose a fencing token, atomically, as acquire.lua does, with one more
-- term in the proposal: the caller's hint. (queue.lua comes first.)
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence key (this master's counter)
-- ARGV[1]  the owner value
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the hint, µs: the caller's clock plus a margin, the same for
--          every master of the round
--
-- The proposal is max(counter + 1, TIME µs, hint), the hint counting only
-- if it is at most 10 s ahead of this master's clock (a client with a wild
-- clock must not push the counter towards 2^53). It becomes the counter. So
-- each master still proposes above its counter and its clock, exactly as
-- with acquire.lua; the hint only makes the masters of a round propose the
-- same number when it is above all their counters and clocks, and then no
-- master is below the round's token, and none needs it written back.
--
-- Returns the proposal (an integer, > 0) when the lock is now held by
-- ARGV[1], or {0, pttl, holder} as acquire.lua does.
if not redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX') then
  local held = redis.call('GET', KEYS[1])
  if held ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[1]), held}
  end
  -- The same request ran twice (a client retry): the lock is ours already.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  local given = redis.call('GET', KEYS[2])
  if given then return tonumber(given) end
end
local now = now_us()
local token = now
local hint = tonumber(ARGV[3])
if hint > token and hint <= now + 10000000 then token = hint end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last + 1 > token then token = last + 1 end
redis.call('SET', KEYS[2], string.format('%.0f', token))
return token
