-- acquire.lua: take a lock and hand out its fencing token, atomically
-- (grant, in queue.lua); or, for a waiter, keep its place in the lock's
-- queue. (queue.lua comes first.)
--
-- KEYS[1]  the lock key (a string holding the owner value)
-- KEYS[2]  the fence key (the last token handed out for this lock; same hash slot)
-- KEYS[3]  the lock's info (string: grant time, a space, published value)
-- KEYS[4]  the waiter queue (sorted set: waiter id -> arrival, µs)
-- KEYS[5]  the waiters' deadlines (hash: waiter id -> stale after, ms)
-- ARGV[1]  the owner value (owner id, a space, the holder label)
-- ARGV[2]  the TTL in milliseconds
-- ARGV[3]  the holder's published value ("" for none)
-- ARGV[4]  the wake-up channel prefix
-- ARGV[5]  the waiter id
-- ARGV[6]  the waiter's slack in ms: its entry is stale once the holder's
--          PTTL, plus a tenth, plus this, has passed without a new attempt
-- ARGV[7]  instead of that, for a waiter that renews its entry by
--          heartbeat.lua: the entry's liveness in ms (absent for Redlock)
--
-- An attempt that does not queue sends only KEYS[1..3] and ARGV[1..3], and
-- touches nothing else.
--
-- Returns grant's answer: the token (an integer, > 0) when the lock is now
-- held by ARGV[1], or {0, pttl, holder} (Redlock tells a majority holder
-- from a split by the holder). A grant is a bare integer rather than an
-- array: it is the reply of every uncontended acquire, and an integer is
-- the cheapest to send and to read.

local waiter = ARGV[5]
local r = grant(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2], ARGV[3])
if type(r) == 'table' then
  if waiter then enqueue(KEYS[4], KEYS[5], waiter, r[2], ARGV[6], ARGV[7]) end
  return r
end

-- A waiter took the lock: the next waiter in the queue is the head now, and
-- still waits for the PTTL of the holder it last saw, which may be far longer
-- than this holder's; woken, it tries and learns this holder's PTTL. An
-- attempt from outside the queue needs no such wake-up: it can only take a
-- lock whose holder released it (which woke the head) or let it expire
-- (when the head's own wait ends), and the head's next try sees it.
if waiter then
  leave_queue(KEYS[4], KEYS[5], waiter)
  wake_head(KEYS[4], KEYS[5], ARGV[4])
end
return r
