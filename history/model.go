package history

import (
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// state is the fenced mutex of one key, as the model sees it.
type state struct {
	holder uint64 // token of the holder; 0 when free
	// until is when the holder's lease may expire at the earliest: its
	// Deadline, which the lock service promised. Before it, nobody else
	// may be granted the lock.
	until int64
	last  uint64 // largest token granted so far
	fence uint64 // largest token the resource has admitted
	// maybe is the largest token of a write whose admission is unknown: the
	// guard may have raised its fence to it, now or at any later moment.
	maybe uint64
}

// input is what the model needs of an operation: the operation itself, its
// return (the latest moment it can have taken effect), and, for a refusal,
// whether someone unseen may have held the lock: an acquisition of unknown
// outcome called before it returned, or another client's refused attempt
// that ran at the same time.
//
// Every operation keeps its real interval, even an ambiguous one whose
// request may reach the server after its call returned: each ambiguous
// outcome is modelled by a state that allows its effect at any later
// moment (a lock that may vanish, a fence that may have risen, a ghost
// holder), which is what a late effect can do.
type input struct {
	op     Op
	ret    int64
	ghosts bool
}

// step is the fenced-mutex model's transition relation: every state the
// key can be in after op, starting in s. An empty result means op is
// impossible in s.
//
// Lease expiry is nondeterministic — a lock service may free an
// unrefreshed lock at any moment after the holder's deadline, or keep it —
// so before each operation the holder may silently disappear, provided the
// operation returned after the holder's deadline. That makes a paused
// holder legal (its lock went to someone else) while keeping two holders
// inside one deadline illegal.
func step(s state, in input) []state {
	pre := []state{s}
	if s.holder != 0 && s.until <= in.ret {
		pre = append(pre, free(s))
	}
	var out []state
	for _, p := range pre {
		out = append(out, apply(p, in)...)
	}
	return out
}

// free is s with the lock freed.
func free(s state) state {
	s.holder, s.until = 0, 0
	return s
}

func apply(s state, in input) []state {
	op := in.op
	switch op.Kind {
	case Acquire, TryAcquire:
		switch op.Outcome {
		case OK:
			// A grant needs a free lock and a token larger than every
			// token granted before.
			if s.holder == 0 && op.Token > s.last {
				s.holder, s.until, s.last = op.Token, int64(op.Deadline), op.Token
				return []state{s}
			}
			return nil
		case Locked:
			// Someone holds it: the holder, or an acquisition whose outcome
			// its client never learned (it may have been granted and held
			// until its TTL; its token is unknown, so it is not a state), or
			// a contender refused while this one ran: one that takes its
			// place before it looks (a queue node, a Redlock majority of
			// grants) and gives it up when it finds another ahead is the
			// head for a moment if that one releases meanwhile, with the
			// lock free (refusedBeside).
			if s.holder != 0 || in.ghosts {
				return []state{s}
			}
			return nil
		}
		// Ambiguous: granted or not, the caller has no lease. A grant to
		// it would only make later operations harder to explain, except
		// ErrLocked, which the ghosts flag covers.
		return []state{s}
	case Refresh:
		if op.Outcome == OK {
			if s.holder != op.Token {
				return nil
			}
			s.until = max(s.until, int64(op.Deadline))
			return []state{s}
		}
		// A failed or ambiguous refresh ends the lease: the portable layer
		// gives it up and releases its lock by owner at once, so the
		// holder's own lock may vanish from here on, whatever its deadline
		// said — before the Ended the runner records when its watcher next
		// runs, which a loaded machine can delay past another's grant. (It
		// may also have extended the lock on the server; until is a lower
		// bound anyway.)
		if s.holder == op.Token {
			s.until = 0
		}
		return []state{s}
	case Release:
		if op.Outcome == OK {
			if s.holder != op.Token {
				return nil
			}
			return []state{free(s)}
		}
		// Lost or ambiguous: the portable layer cleans up a lost lease by
		// owner, and an ambiguous release may yet land, so the holder's own
		// lock may vanish at any moment from now on — never another's.
		if s.holder == op.Token {
			s.until = 0
		}
		return []state{s}
	case Ended:
		// The holder was told its lease ended: its lock may vanish from now
		// on, whatever its deadline said.
		if s.holder == op.Token {
			s.until = 0
		}
		return []state{s}
	case WriteBegin, WriteEnd:
		switch op.Outcome {
		case OK:
			// Admitted: not lower than anything admitted before, and a
			// token that was granted.
			if op.Token >= s.fence && op.Token <= s.last {
				s.fence = op.Token
				return []state{s}
			}
			return nil
		case Refused:
			if op.Token < s.fence || op.Token < s.maybe {
				return []state{s}
			}
			return nil
		}
		s.maybe = max(s.maybe, op.Token)
		return []state{s}
	}
	return nil
}

func describeState(v any) string {
	s := v.(state)
	h := "free"
	if s.holder != 0 {
		h = fmt.Sprintf("held by %d until %s", s.holder, ms(time.Duration(s.until)))
	}
	f := fmt.Sprintf("%s, last %d, fence %d", h, s.last, s.fence)
	if s.maybe > s.fence {
		f += fmt.Sprintf(" (maybe %d)", s.maybe)
	}
	return f
}

// model is the porcupine model over one or more keys' histories.
var model = (&porcupine.NondeterministicModel{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, o := range h {
			k := o.Input.(input).op.Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], o)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() []any { return []any{state{}} },
	Step: func(s, in, _ any) []any {
		next := step(s.(state), in.(input))
		out := make([]any, len(next))
		for i, n := range next {
			out[i] = n
		}
		return out
	},
	Hash: func(v any) uint64 {
		s := v.(state)
		h := s.holder*0x9e3779b97f4a7c15 ^ uint64(s.until)*0xbf58476d1ce4e5b9
		return h ^ s.last*0x94d049bb133111eb ^ s.fence*0x2545f4914f6cdd1d ^ s.maybe
	},
	DescribeOperation: func(in, _ any) string {
		op := in.(input).op
		s := fmt.Sprintf("c%d %s", op.Client, op.Kind)
		if op.Token != 0 {
			s += fmt.Sprintf(" t%d", op.Token)
		}
		return s + " → " + op.Outcome.String()
	},
	DescribeState: describeState,
}).ToModel()

// operations turns recorded operations into porcupine's form.
func operations(ops []Op) []porcupine.Operation {
	// Per key: the first acquisition of unknown outcome, for the ghosts
	// flag; the refused acquisitions, and where each lease ended, for
	// refusedBeside.
	firstGhost := map[string]int64{}
	refused := map[string][]Op{}
	ends := map[string][]leaseEnd{}
	endOf := map[int]*leaseEnd{} // by lease
	for _, op := range ops {
		if op.Kind == Acquire || op.Kind == TryAcquire {
			switch op.Outcome {
			case Ambiguous:
				if g, ok := firstGhost[op.Key]; !ok || int64(op.Call) < g {
					firstGhost[op.Key] = int64(op.Call)
				}
			case Locked:
				refused[op.Key] = append(refused[op.Key], op)
			}
		}
		if op.Lease != 0 {
			if e := endOf[op.Lease]; e != nil {
				e.at = max(e.at, op.Call)
			} else {
				endOf[op.Lease] = &leaseEnd{key: op.Key, client: op.Client, at: op.Call}
			}
		}
	}
	for _, e := range endOf {
		ends[e.key] = append(ends[e.key], *e)
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := int64(op.Return)
		g, ok := firstGhost[op.Key]
		in := input{op: op, ret: ret, ghosts: ok && g < ret || op.Outcome == Locked && refusedBeside(refused[op.Key], ends[op.Key], op)}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: int64(op.Call), Return: ret})
	}
	return out
}

// leaseEnd is where a lease of key ended: its last operation's call (a
// release, or the Ended of a lost lease), by its holder, client.
type leaseEnd struct {
	key    string
	client int
	at     time.Duration
}

// refusedBeside reports whether a contender may have refused op: another
// client's acquisition on op's key (one of refused), refused while op ran,
// that queued behind a lease which then ended — the moment its place was
// the head. The lease (one of ends, op's key's) is another client's than
// the contender's and ended inside the contender's call and before op
// returned. Refusals with no such lease (a service that refuses free
// locks, refusals that met only each other) explain nothing.
func refusedBeside(refused []Op, ends []leaseEnd, op Op) bool {
	return slices.ContainsFunc(refused, func(c Op) bool {
		return c.Client != op.Client && c.Call < op.Return && op.Call < c.Return &&
			slices.ContainsFunc(ends, func(e leaseEnd) bool {
				return e.client != c.Client && c.Call < e.at && e.at < c.Return && e.at < op.Return
			})
	})
}

// checkKey checks one key's history for linearizability.
func checkKey(m porcupine.Model, ops []Op, timeout time.Duration) porcupine.CheckResult {
	res, _ := porcupine.CheckOperationsVerbose(m, operations(ops), timeout)
	return res
}
