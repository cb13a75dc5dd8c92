package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

func sortOps(ops []Op) {
	slices.SortStableFunc(ops, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.Call, b.Call), cmp.Compare(a.Return, b.Return))
	})
}

// byKey splits a history by key, each part in call order, keys in the
// order given.
func byKey(ops []Op, keys []string) map[string][]Op {
	out := make(map[string][]Op, len(keys))
	for _, op := range ops {
		out[op.Key] = append(out[op.Key], op)
	}
	for _, k := range keys {
		sortOps(out[k])
	}
	return out
}

// checkTokens checks a key's successful acquisitions: tokens > 0, unique,
// and increasing in real-time order (an acquisition that returned before
// another was called has the smaller token).
func checkTokens(key string, ops []Op) []Violation {
	var acq []Op
	for _, op := range ops {
		if (op.Kind == Acquire || op.Kind == TryAcquire) && op.Outcome == OK {
			acq = append(acq, op)
		}
	}
	var out []Violation
	seen := map[uint64]Op{}
	for _, a := range acq {
		if a.Token == 0 {
			out = append(out, Violation{Check: CheckTokens, Key: key, Detail: "token 0 granted", Ops: []Op{a}})
			continue
		}
		if b, dup := seen[a.Token]; dup {
			out = append(out, Violation{Check: CheckTokens, Key: key,
				Detail: fmt.Sprintf("token %d granted to two acquisitions", a.Token), Ops: []Op{b, a}})
			continue
		}
		seen[a.Token] = a
	}
	// Walk the acquisitions in call order while a second cursor admits, in
	// return order, every acquisition that returned before the current
	// one was called; the largest token among those must be smaller.
	byReturn := slices.Clone(acq)
	slices.SortFunc(byReturn, func(a, b Op) int { return cmp.Compare(a.Return, b.Return) })
	var prev Op
	j := 0
	for _, a := range acq {
		for ; j < len(byReturn) && byReturn[j].Return < a.Call; j++ {
			if byReturn[j].Token > prev.Token {
				prev = byReturn[j]
			}
		}
		if prev.Lease != 0 && prev.Token > a.Token { // equal tokens are reported above
			out = append(out, Violation{Check: CheckTokens, Key: key,
				Detail: fmt.Sprintf("token %d granted after token %d had been returned", a.Token, prev.Token),
				Ops:    []Op{prev, a}})
		}
	}
	return firstPerCheck(out, 3)
}

// firstPerCheck keeps the first n violations: one broken backend makes
// hundreds of them, and the first few tell the story.
func firstPerCheck(vs []Violation, n int) []Violation {
	if len(vs) > n {
		return vs[:n]
	}
	return vs
}

// checkLinearizable checks a key's history against the model. On a
// violation it searches, within budget, for a smaller history that still
// fails, and returns that.
func checkLinearizable(m porcupine.Model, key string, ops []Op, timeout, budget time.Duration) (porcupine.CheckResult, *Violation) {
	res := checkKey(m, ops, timeout)
	if res != porcupine.Illegal {
		return res, nil
	}
	small := shrink(m, ops, min(timeout, 2*time.Second), budget)
	return res, &Violation{Check: CheckLinearizable, Key: key,
		Detail: fmt.Sprintf("no linearization of %d operations fits the model; a failing history of %d:", len(ops), len(small)),
		Ops:    small}
}

// changesState reports whether op can change the model's state; the others
// only constrain it (a refusal, ErrLocked, a failed refresh, an acquisition
// of unknown outcome).
func changesState(op Op) bool {
	switch op.Kind {
	case Acquire, TryAcquire, Refresh:
		return op.Outcome == OK
	case Release, Ended:
		return true
	case WriteBegin, WriteEnd:
		return op.Outcome == OK
	}
	return false
}

// shrink looks for a small non-linearizable subset of ops. Removing an
// operation can make a history illegal on its own (drop an acquisition and
// its release has no holder), so it removes only what cannot: first the
// operations that merely constrain the state (a refusal, ErrLocked, a
// failed refresh, an acquisition of unknown outcome), all at once if the
// violation needs none of them, else those it does not need; then whole
// leases, each an acquisition with its refreshes, writes and release; then
// refreshes and admitted writes, which only raise bounds. Every step keeps
// the history illegal, so what the budget leaves unfinished is only larger.
func shrink(m porcupine.Model, ops []Op, timeout, budget time.Duration) []Op {
	stop := time.Now().Add(budget)
	illegal := func(h []Op) bool {
		return time.Now().Before(stop) && checkKey(m, h, timeout) == porcupine.Illegal
	}
	core := slices.DeleteFunc(slices.Clone(ops), func(op Op) bool { return !changesState(op) })
	if !illegal(core) {
		// Some constraint is needed. Drop the others in halving chunks
		// (a refusal is explained by operations called after it, so no
		// prefix of the history is the right cut).
		core = slices.Clone(ops)
		for size := max(1, len(core)/2); ; size /= 2 {
			for end := len(core); end > 0; end -= size {
				start := max(0, end-size)
				kept := slices.DeleteFunc(slices.Clone(core[start:end]), func(op Op) bool { return !changesState(op) })
				if len(kept) == end-start {
					continue // nothing to drop here
				}
				if cand := slices.Concat(core[:start], kept, core[end:]); illegal(cand) {
					core = cand
				}
			}
			if size == 1 {
				break
			}
		}
	}
	h := core
	var leases []int
	for _, op := range h {
		if op.Lease != 0 && !slices.Contains(leases, op.Lease) {
			leases = append(leases, op.Lease)
		}
	}
	for _, l := range slices.Backward(leases) {
		cand := slices.DeleteFunc(slices.Clone(h), func(op Op) bool { return op.Lease == l })
		if illegal(cand) {
			h = cand
		}
	}
	for i := len(h) - 1; i >= 0; i-- {
		if k := h[i].Kind; k == Acquire || k == TryAcquire || k == Release {
			continue
		}
		cand := slices.Delete(slices.Clone(h), i, i+1)
		if illegal(cand) {
			h = cand
		}
	}
	return h
}
