package history

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/distlock/locker/fencing"
)

// resource is the thing the lock protects: one counter per key, updated by
// a read-modify-write in two steps (WriteBegin reads, WriteEnd writes the
// value read plus one), each step admitted by the guard on its own. Were two
// holders' updates to interleave, one increment would be lost — which is why
// the lock and the fence exist. Every admitted step goes to a per-key log,
// in the order the resource applied it, for the checks.
type resource struct {
	guard fencing.Guard
	mu    sync.Mutex
	keys  map[string]*keyResource
}

type keyResource struct {
	// mu makes a guard's admission and the step it admits one atomic step
	// at the resource, as a guard that lives with its store does.
	mu    sync.Mutex
	value int64
	read  map[int]int64 // value read by each write's begin
	log   []entry
	acked int // writes whose end was admitted: acknowledged updates
}

// entry is one admitted step, in the resource's own order.
type entry struct {
	write int
	token uint64
	end   bool
	value int64 // read by a begin, written by an end
}

func newResource(g fencing.Guard) *resource {
	return &resource{guard: g, keys: map[string]*keyResource{}}
}

func (r *resource) key(k string) *keyResource {
	r.mu.Lock()
	defer r.mu.Unlock()
	kr := r.keys[k]
	if kr == nil {
		kr = &keyResource{read: map[int]int64{}}
		r.keys[k] = kr
	}
	return kr
}

// step runs one half of write number w on key k with token. It reports
// Refused for a stale token and Ambiguous when the guard failed otherwise
// (nothing is applied then, but a remote guard may have raised its fence).
func (r *resource) step(ctx context.Context, k string, w int, token uint64, end bool) (Outcome, error) {
	kr := r.key(k)
	kr.mu.Lock()
	defer kr.mu.Unlock()
	err := r.guard.Admit(ctx, k, token)
	switch {
	case errors.Is(err, fencing.ErrStaleToken):
		return Refused, err
	case err != nil:
		return Ambiguous, err
	}
	e := entry{write: w, token: token, end: end}
	if end {
		kr.value = kr.read[w] + 1
		kr.acked++
		e.value = kr.value
	} else {
		kr.read[w] = kr.value
		e.value = kr.value
	}
	kr.log = append(kr.log, e)
	return OK, nil
}

// check runs the resource-side checks on every key's log. ops maps a write
// number to its recorded operations, for the report.
func (r *resource) check(writes map[int][]Op) []Violation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Violation
	for k, kr := range r.keys {
		kr.mu.Lock()
		out = append(out, kr.check(k, writes)...)
		kr.mu.Unlock()
	}
	return out
}

func (kr *keyResource) check(k string, writes map[int][]Op) []Violation {
	var out []Violation
	// A guard must never admit a token lower than one it already admitted.
	var highest entry
	for i, e := range kr.log {
		if i > 0 && e.token < highest.token {
			out = append(out, Violation{Check: CheckFenceOrder, Key: k,
				Detail: fmt.Sprintf("write %d admitted with token %d after write %d was admitted with token %d",
					e.write, e.token, highest.write, highest.token),
				Ops: opsOf(writes, highest.write, e.write)})
			break
		}
		if e.token >= highest.token {
			highest = e
		}
	}
	// An acknowledged update's two halves must be adjacent in the log: any
	// other write's step between them means two holders interleaved.
	begin := map[int]int{} // write → index of its begin
	for i, e := range kr.log {
		if !e.end {
			begin[e.write] = i
			continue
		}
		b, ok := begin[e.write]
		if !ok {
			continue
		}
		for j := b + 1; j < i; j++ {
			o := kr.log[j]
			out = append(out, Violation{Check: CheckExclusive, Key: k,
				Detail: fmt.Sprintf("write %d (token %d) ran between the begin and the end of write %d (token %d)",
					o.write, o.token, e.write, e.token),
				Ops: opsOf(writes, e.write, o.write)})
			break
		}
	}
	// Every acknowledged update must be in the final value.
	if kr.value != int64(kr.acked) {
		v := Violation{Check: CheckLostUpdate, Key: k,
			Detail: fmt.Sprintf("%d updates acknowledged, final value %d", kr.acked, kr.value)}
		wrote := map[int64]int{}
		for _, e := range kr.log {
			if !e.end {
				continue
			}
			if other, dup := wrote[e.value]; dup {
				v.Detail += fmt.Sprintf("; writes %d and %d both wrote %d", other, e.write, e.value)
				v.Ops = opsOf(writes, other, e.write)
				break
			}
			wrote[e.value] = e.write
		}
		out = append(out, v)
	}
	return out
}

func opsOf(writes map[int][]Op, ws ...int) []Op {
	var out []Op
	for _, w := range ws {
		out = append(out, writes[w]...)
	}
	sortOps(out)
	return out
}

// counts reports the acknowledged updates over all keys.
func (r *resource) acked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, kr := range r.keys {
		kr.mu.Lock()
		n += kr.acked
		kr.mu.Unlock()
	}
	return n
}
