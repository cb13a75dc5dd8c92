-- acquire_wait.lua: the rest of acquire.lua, for a waiter (ARGV[5]): the
-- queue's side of r, grant's answer. (queue.lua and waiting.lua come
-- first.)

local waiter = ARGV[5]
if type(r) == 'table' then
  enqueue(KEYS[3], KEYS[4], waiter, r[2], ARGV[6], ARGV[7])
  return r
end

-- A waiter took the lock: the next waiter in the queue is the head now, and
-- still waits for the PTTL of the holder it last saw, which may be far longer
-- than this holder's; woken, it tries and learns this holder's PTTL. An
-- attempt from outside the queue needs no such wake-up: it can only take a
-- lock whose holder released it (which woke the head) or let it expire
-- (when the head's own wait ends), and the head's next try sees it.
leave_queue(KEYS[3], KEYS[4], waiter)
wake_head(KEYS[3], KEYS[4], ARGV[4])
return r
