-- signal.lua: the watchers' signal, for the scripts that change a lock.

-- signal tells the watchers of a lock that it changed (what: granted,
-- released, published). Its channel is the lock key's name with ':ev' for
-- ':lock': in the lock's hash slot, where SPUBLISH (Redis 7) reaches only
-- the slot's shard of a Cluster, not every node as PUBLISH does.
local function signal(lock, what)
  local ch = string.sub(lock, 1, -6) .. ':ev'
  if redis.REDIS_VERSION_NUM then
    redis.call('SPUBLISH', ch, what)
  else
    redis.call('PUBLISH', ch, what)
  end
end
