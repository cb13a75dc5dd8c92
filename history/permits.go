package history

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// MaxLimit is the largest Options.Limit the permits model checks.
const MaxLimit = 8

// permit is one holder of an N-permit key, as the model sees it.
type permit struct {
	token uint64
	until int64 // as state.until
}

// permits is an N-permit key: at most limit holders at once, each a lease
// of its own with a token unique and larger than every token before it.
// Holders are kept in token order, so that equal states compare equal.
// There is no fence: a resource guarded by the largest token admitted does
// not fit N concurrent holders, so runs with permits make no writes.
type permits struct {
	n       int
	holders [MaxLimit]permit
	last    uint64
}

func (s permits) held() []permit { return s.holders[:s.n] }

func (s permits) index(token uint64) int {
	return slices.IndexFunc(s.held(), func(p permit) bool { return p.token == token })
}

func (s permits) without(i int) permits {
	copy(s.holders[i:s.n], s.holders[i+1:s.n])
	s.n--
	s.holders[s.n] = permit{}
	return s
}

// permitStep is the permits model's transition relation (see step): before
// each operation, every holder whose deadline the operation returned after
// may silently have expired, in any combination.
func permitStep(limit int, s permits, in input) []permits {
	pre := []permits{s}
	for i := s.n - 1; i >= 0; i-- {
		if s.holders[i].until > in.ret {
			continue
		}
		for _, p := range pre {
			if j := p.index(s.holders[i].token); j >= 0 {
				pre = append(pre, p.without(j))
			}
		}
	}
	var out []permits
	for _, p := range pre {
		out = append(out, applyPermit(limit, p, in)...)
	}
	return out
}

func applyPermit(limit int, s permits, in input) []permits {
	op := in.op
	i := s.index(op.Token)
	switch op.Kind {
	case Acquire, TryAcquire:
		switch op.Outcome {
		case OK:
			if s.n < limit && op.Token > s.last {
				s.holders[s.n] = permit{token: op.Token, until: int64(op.Deadline)}
				s.n++
				s.last = op.Token
				return []permits{s}
			}
			return nil
		case Locked:
			// Every permit held, or acquisitions of unknown outcome or
			// refused contenders may hold the rest (see apply).
			if s.n == limit || in.ghosts {
				return []permits{s}
			}
			return nil
		}
		return []permits{s}
	case Refresh:
		if op.Outcome == OK {
			if i < 0 {
				return nil
			}
			s.holders[i].until = max(s.holders[i].until, int64(op.Deadline))
			return []permits{s}
		}
		// Failed: the lease ended, and its lock may go from here on (see
		// the one-holder model).
		if i >= 0 {
			s.holders[i].until = 0
		}
		return []permits{s}
	case Release:
		if op.Outcome == OK {
			if i < 0 {
				return nil
			}
			return []permits{s.without(i)}
		}
		if i >= 0 {
			s.holders[i].until = 0
		}
		return []permits{s}
	case Ended:
		if i >= 0 {
			s.holders[i].until = 0
		}
		return []permits{s}
	}
	return nil
}

// permitsModel is the porcupine model of keys that admit limit holders.
func permitsModel(limit int) porcupine.Model {
	return (&porcupine.NondeterministicModel{
		Partition: model.Partition,
		Init:      func() []any { return []any{permits{}} },
		Step: func(s, in, _ any) []any {
			next := permitStep(limit, s.(permits), in.(input))
			out := make([]any, len(next))
			for i, n := range next {
				out[i] = n
			}
			return out
		},
		Hash: func(v any) uint64 {
			s := v.(permits)
			h := s.last*0x94d049bb133111eb ^ uint64(s.n)
			for _, p := range s.held() {
				h = h*0x9e3779b97f4a7c15 ^ p.token ^ uint64(p.until)*0xbf58476d1ce4e5b9
			}
			return h
		},
		DescribeOperation: model.DescribeOperation,
		DescribeState: func(v any) string {
			s := v.(permits)
			var hs []string
			for _, p := range s.held() {
				hs = append(hs, fmt.Sprintf("%d until %s", p.token, ms(time.Duration(p.until))))
			}
			return fmt.Sprintf("%d of %d held [%s], last %d", s.n, limit, strings.Join(hs, ", "), s.last)
		},
	}).ToModel()
}
