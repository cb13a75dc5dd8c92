package etcd

// maxQueued is how many waiter keys one Locker keeps waiting in one lock's
// range at a time. Every create txn of Acquire and every re-check reads the
// lock's range sorted by create revision, which etcd does by reading the
// whole range — inside its apply loop for a create. A crowd of 10,000 keys
// made each create cost 10,000 reads there: the loop fell behind, renewals
// timed out and the shared lease died with every waiter on it. With at most
// maxQueued keys per Locker the range stays small; the Locker's further
// Acquires of the lock wait in the process, in arrival order.
const maxQueued = 8
