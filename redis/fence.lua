-- fence.lua (Redlock): raise a node's fence to the token chosen from the
-- majority. On a master that granted the lock, only while the caller still
-- holds it there; on a master that answered without granting, whoever holds
-- the lock: a fence only rises, and every master that carries the token
-- makes a later majority see it.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the fence key
-- ARGV[1]  the owner value, framed (see take.lua), or "" to raise the
--          fence unconditionally
-- ARGV[2]  the token, in decimal
--
-- Returns 1 when the fence is now >= the token, 0 when the lock is not ours.
if ARGV[1] ~= '' and string.sub(redis.call('GET', KEYS[1]) or '', 1, #ARGV[1]) ~= ARGV[1] then
  return 0
end
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if last < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
