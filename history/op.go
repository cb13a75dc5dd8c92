package history

import (
	"fmt"
	"strings"
	"time"
)

// Kind is what an operation did.
type Kind int

// The operations of a history. WriteBegin and WriteEnd are the two halves of
// one update of the fenced resource, each admitted by the guard on its own,
// so that a second holder's write can land between them if the lock lets it.
const (
	Acquire    Kind = iota + 1 // Locker.Acquire with a timeout
	TryAcquire                 // Locker.TryAcquire
	Refresh                    // Lease.Refresh
	Release                    // Lease.Release
	WriteBegin                 // first half of a fenced update: read the value
	WriteEnd                   // second half: write the value read plus one
	// Ended is not a call: it marks when a lease's Done closed because the
	// lease was lost (the backend reported it gone, a refresh failed, the
	// deadline passed). From then on the holder knows it holds nothing, so
	// the lock service may give the lock to another even before the
	// deadline (a PostgreSQL connection that dropped, a ZooKeeper session
	// declared suspect).
	Ended
)

var kindNames = [...]string{
	Acquire: "acquire", TryAcquire: "try-acquire", Refresh: "refresh",
	Release: "release", WriteBegin: "write-begin", WriteEnd: "write-end", Ended: "ended",
}

// String returns the kind's name, as printed in histories.
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Outcome is what an operation returned, as far as the client can know.
type Outcome int

// Outcomes. Ambiguous is never resolved by guessing: the checks treat an
// ambiguous operation as having taken effect or not, whichever they need.
const (
	OK        Outcome = iota + 1 // acquired, refreshed, released, or write admitted
	Locked                       // try-acquire: ErrLocked, held by another owner
	Lost                         // refresh or release: ErrLeaseLost or ErrReleased
	Refused                      // write: the guard refused a stale token
	Ambiguous                    // unknown: a timeout, ErrUnavailable, or any other error
)

var outcomeNames = [...]string{
	OK: "ok", Locked: "locked", Lost: "lost", Refused: "refused", Ambiguous: "ambiguous",
}

// String returns the outcome's name, as printed in histories.
func (o Outcome) String() string {
	if o > 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// Op is one recorded operation. Times are offsets from the start of the run
// on the monotonic clock.
type Op struct {
	Client  int     // the client (one Locker each) that ran it
	Key     string  // the lock key, which is also the fenced resource's name
	Kind    Kind    // what was called
	Outcome Outcome // what it returned
	// Token is the fencing token: granted by an acquisition, or carried by
	// a refresh, release or write. 0 for an acquisition that failed.
	Token uint64
	// Lease numbers the acquisition this operation belongs to (> 0), shared
	// by the acquisition and the refreshes, releases and writes of its lease.
	// 0 for acquisitions that did not succeed.
	Lease int
	// Write numbers the update a WriteBegin or WriteEnd belongs to.
	Write int
	// Call and Return are when the call was made and when it returned.
	Call, Return time.Duration
	// Deadline is the lease's Deadline after a successful acquisition or
	// refresh: until then the lock service has promised the lock to this
	// holder alone.
	Deadline time.Duration
	// Err is the error returned, if any.
	Err string
}

// String formats op on one line: its interval, client, kind, key, outcome,
// and what it carried.
func (op Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%9s..%-9s c%-2d %-11s %-12q %s", ms(op.Call), ms(op.Return), op.Client, op.Kind, op.Key, op.Outcome)
	if op.Token != 0 {
		fmt.Fprintf(&b, " token=%d", op.Token)
	}
	if op.Lease != 0 {
		fmt.Fprintf(&b, " lease=%d", op.Lease)
	}
	if op.Write != 0 {
		fmt.Fprintf(&b, " write=%d", op.Write)
	}
	if op.Deadline != 0 {
		fmt.Fprintf(&b, " deadline=%s", ms(op.Deadline))
	}
	if op.Err != "" {
		fmt.Fprintf(&b, " err=%q", op.Err)
	}
	return b.String()
}

// ms formats an offset in milliseconds with a sign, as in the visualisation.
func ms(d time.Duration) string {
	return fmt.Sprintf("+%.3fms", float64(d)/float64(time.Millisecond))
}

// FormatOps formats ops one a line, in call order, for a failure message.
func FormatOps(ops []Op) string {
	var b strings.Builder
	for _, op := range ops {
		b.WriteString("    ")
		b.WriteString(op.String())
		b.WriteByte('\n')
	}
	return b.String()
}
