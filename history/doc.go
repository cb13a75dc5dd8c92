// Package history records randomized histories of lock operations against
// a real lock service and checks them: the safety half of locker's proof
// under faults, beside the example-based conformance suite.
//
// Run (or, in a test, Check) starts a few clients — separate Lockers, so
// separate connections — that acquire a few keys (blocking or not), hold
// them while writing through a fenced resource and refreshing, release
// them, and sometimes pause past the TTL before a last write: the holder
// stalled by a GC pause. Every operation is recorded with its call and
// return; one whose outcome the client cannot know is [Ambiguous] and never
// guessed. An optional [Nemesis] injects faults meanwhile and heals them;
// then a fresh client must acquire every key within Options.Liveness.
//
// Each key's history must be linearizable (porcupine) against a fenced
// mutex: a grant needs a free lock and a token larger than every earlier
// one and holds until its Deadline at least; refresh and release need their
// lease to be the holder; ErrLocked needs a holder (or an acquisition of
// unknown outcome, or a contender refused beside it whose place became the
// head when a lease ended); an admitted write needs a token not lower than
// any admitted before. Expiry is a nondeterministic step allowed only after
// the holder's Deadline, so a paused holder is legal and a second holder
// inside the first one's deadline is not. With Options.Limit the model is
// N permits; with Options.Elections every key is an election (package
// election). A check that runs out of time is unknown, never a pass.
//
// Beside linearizability, the checks read what did happen: distinct,
// growing tokens (CheckTokens); the resource's own admission order
// (CheckFenceOrder); no step of another write inside an acknowledged one
// (CheckExclusive); no lost update (CheckLostUpdate); liveness
// (CheckLiveness).
//
// A fault the backend does not claim to survive breaks the deadline rule
// and is reported: that is how a soak tells what lies within each
// backend's stated guarantee. Counts add up over runs (Counts.Add); a
// failing Result keeps the smallest failing history and can write
// porcupine's visualisation (Result.WriteVisualization).
//
// The package's tests prove the checks have teeth against deliberately
// broken services. docs/design/history.md has the whole model and its
// reasoning; docs/reliability.md the runs and their figures.
package history
