// Package election is leader election over any locker.Locker, with a
// fencing token per term: of the candidates that campaign for one election,
// at most one leads at a time, and each term's token is larger than every
// earlier term's.
//
//	l, _ := locker.Open(ctx, "etcd://h1:2379/app")
//	e, _ := election.New(l, "scheduler", election.WithLabel(hostname))
//	err := election.Run(ctx, e, addr, func(ctx context.Context, t *election.Term) error {
//		return scheduleUntil(ctx, t.Token()) // writes carry t.Token()
//	})
//
// An election is the lock named after it: Campaign acquires it (blocking,
// served as the backend serves waiters), the Term is the lease, refreshed in
// the background, and Resign releases it, handing the lead to the next
// candidate. Term.Done closes the moment leadership is lost — the lease
// could not be refreshed, the backend reported it gone — and a leader that
// crashed is replaced once its lease's TTL (WithTTL) runs out. Run is the
// loop most services want: campaign, work while leading, campaign again.
//
// Leadership alone cannot stop a leader that was paused past its TTL (a GC
// pause, a stalled VM, a partition) from writing after its successor took
// over: send Term.Token with every write and let the resource refuse tokens
// lower than one it has seen (package fencing).
//
// What each part needs of the backend (README.md has the table):
//
//   - Campaign, Resign and Run work on every backend.
//   - A campaign value and Proclaim need a backend that publishes a value
//     with its locks (locker.Publish); others refuse a non-empty value with
//     locker.ErrUnsupported.
//   - Leader needs inspection (locker.Inspect); ErrNoLeader when nobody
//     leads.
//   - Observe needs watches (locker.Watch): the engine's own notification,
//     never polling. It sends leaders in term order, coalescing changes the
//     receiver is too slow for, and never goes back to an older term.
//
// Errors are locker's (errors.Is), prefixed with the election's name. The
// design, and why an election is a lock, is in docs/design/election.md.
package election
