// Package history records randomized histories of lock operations against
// a real lock service and checks them: the safety half of locker's proof
// under faults, beside the example-based conformance suite.
//
// # A run
//
// Run (or, in a test, Check) starts a few clients — separate Lockers, so
// separate connections — that for a bounded number of operations and a
// bounded time pick a key among a few and:
//
//   - acquire it, blocking with a random timeout, or try to;
//   - hold it, writing through a fenced resource (below) and refreshing
//     between writes, then release it;
//   - or, for a share of holds, pause: stop refreshing, sleep past the TTL,
//     then write and release anyway — the holder stalled by a GC pause.
//
// Every operation is recorded with its call and return on the monotonic
// clock. An operation whose outcome the client cannot know — a timeout,
// ErrUnavailable, any unexpected error — is marked [Ambiguous] and never
// guessed: the checks allow it to have taken effect or not, and at any
// later moment.
//
// The fenced resource keeps one counter per key, updated by a
// read-modify-write in two steps (WriteBegin reads, WriteEnd writes the
// value read plus one), each admitted by the fencing.Guard on its own. If
// two holders' updates interleave, an increment is lost: the lock and the
// fence exist to prevent exactly that.
//
// After the clients stop, every Locker is closed and a fresh client must
// acquire every key within a bound (liveness). An optional Nemesis injects
// faults meanwhile and heals them before the liveness check.
//
// # The model
//
// Each key's history must be linearizable (checked with porcupine) against
// a fenced mutex whose state is the holder's token, the earliest moment the
// holder's lease may expire, the largest token granted and the largest token
// the resource admitted:
//
//   - an acquisition needs a free lock and a token larger than every token
//     granted before; it holds until its Deadline at least;
//   - a refresh needs its lease to be the holder, and extends that bound;
//   - a release needs its lease to be the holder; a release that failed
//     (lease lost, or unknown) may still free the holder's own lock, at any
//     later moment, never another's;
//   - ErrLocked needs a holder, or an acquisition of unknown outcome
//     called earlier (it may have been granted and left to expire);
//   - an admitted write needs a granted token not lower than any admitted
//     before; a refused one needs a lower token.
//
// Lease expiry is a nondeterministic step: before any operation the holder
// may vanish, provided the operation returned after the holder's Deadline —
// the moment until which the lock service promised the lock (Start + TTL −
// drift margin, see [locker.Lease]). So a paused holder is legal (its lock went
// to someone else after its deadline), while a second holder inside the
// first one's deadline, a token that does not grow, a release of someone
// else's lock, or a stale write admitted, are not. A check that runs out of
// Options.CheckTimeout is reported as unknown, which fails Check: it is never
// a pass.
//
// With Options.Limit above 1 every key is an N-permit lock and the model is
// N permits: up to Limit holders at once, each with the rules above, each
// token larger than every token granted before across all permits, ErrLocked
// only with every permit held (or an acquisition of unknown outcome), and
// each holder's expiry its own nondeterministic step. Holders make no
// writes then: a fence that keeps the largest token admits one holder.
//
// # Elections
//
// With Options.Elections every key is an election (package election) and
// every client a candidate: it campaigns on a fresh Election, leads with a
// term that refreshes itself, writes with the term's token, sometimes
// pauses past the TTL before its last write, and resigns; the liveness
// check campaigns. The checks are the same. A term's background refreshes
// are not calls of the client, so the client watches its lease's deadline
// and records each refresh it sees as a Refresh over an interval that
// contains the real one ([D − TTL, seen] for a deadline D): the model stays
// sound. docs/design/election.md has the reasoning.
//
// # The other checks
//
// Besides linearizability, which reasons about what could have happened, a
// few checks read what did happen:
//
//   - tokens (CheckTokens): per key, every acquisition got a distinct token
//     > 0, larger than that of every acquisition that returned before it was
//     called — fencing is useless without this;
//   - fence order (CheckFenceOrder): the resource, in its own order, never
//     admitted a token lower than one it had admitted — the guard's promise;
//   - exclusive writes (CheckExclusive): no step of another write landed
//     between the two steps of an acknowledged write — what the lock is for;
//   - lost updates (CheckLostUpdate): the final counter equals the number of
//     acknowledged updates;
//   - liveness (CheckLiveness): every key was acquirable after the run.
//
// The deadline rule is the strongest promise of the contract (package
// driver: a lock is valid on the server until at least Lock.Start + TTL).
// A fault the backend does not claim to survive — a Redis failover that
// loses the lock, a server clock jump — breaks it and is reported; that is
// how a soak tells what lies within each backend's stated guarantee.
//
// # Faults and soaks
//
// A Nemesis plugs into a run (Options.Nemesis): it breaks the service on
// its own schedule while the clients run, records each fault's window
// (drawn in the visualisation), and heals everything before the liveness
// check. Counts add up over runs (Counts.Add), which is what a soak prints
// per backend and fault mix: histories, operations, acquisitions, stale
// writes refused, violations, unknown checks.
//
// A failing result keeps the smallest failing history found (printed by
// Check) and can write porcupine's HTML visualisation, with pauses and
// faults drawn as annotations (Result.WriteVisualization).
//
// The package's own tests prove the checks have teeth: deliberately broken
// backends — tokens that repeat or go backwards, a release without owner
// check, a lease whose local deadline lies, an acquire that ignores a held
// lock — and a guard that admits stale tokens are each reported, by the
// check named in the test.
package history
