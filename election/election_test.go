package election_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/election"
	"github.com/distlock/locker/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// opTimeout bounds a call expected to succeed on the in-process store.
const opTimeout = 30 * time.Second

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newLocker returns a Locker over store, closed when the test ends.
func newLocker(t *testing.T, store *memory.Store) locker.Locker {
	t.Helper()
	l, err := memory.New(store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newElection(t *testing.T, l locker.Locker, label string) *election.Election {
	t.Helper()
	e, err := election.New(l, "election", election.WithLabel(label), election.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestNew_BadInput(t *testing.T) {
	l := newLocker(t, memory.NewStore())
	for _, tc := range []struct {
		name string
		l    locker.Locker
		opts []election.Option
		want error
	}{
		{"", l, nil, locker.ErrInvalidKey},
		{"a\x00b", l, nil, locker.ErrInvalidKey},
		{strings.Repeat("k", locker.MaxKeyLen+1), l, nil, locker.ErrInvalidKey},
		{"e", nil, nil, locker.ErrInvalidOption},
		{"e", l, []election.Option{election.WithTTL(time.Millisecond)}, locker.ErrInvalidOption},
		{"e", l, []election.Option{election.WithLabel(strings.Repeat("l", locker.MaxKeyLen+1))}, locker.ErrInvalidOption},
		{"e", l, []election.Option{election.WithLogger(nil)}, locker.ErrInvalidOption},
	} {
		if _, err := election.New(tc.l, tc.name, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("New(%q) = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCampaign_ValueTooLarge_InvalidOption(t *testing.T) {
	e := newElection(t, newLocker(t, memory.NewStore()), "a")
	if _, err := e.Campaign(ctx(t), strings.Repeat("v", locker.MaxValue+1)); !errors.Is(err, locker.ErrInvalidOption) {
		t.Fatalf("Campaign with a value over MaxValue = %v, want ErrInvalidOption", err)
	}
}

// TestRun_FnFailsWhileLeading: Run resigns and returns fn's error.
func TestRun_FnFailsWhileLeading(t *testing.T) {
	store := memory.NewStore()
	e := newElection(t, newLocker(t, store), "a")
	failed := errors.New("the job failed")
	var token uint64
	err := election.Run(ctx(t), e, "v", func(_ context.Context, term *election.Term) error {
		token = term.Token()
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("Run = %v, want fn's error", err)
	}
	// Resigned: the next candidate leads with a larger token at once.
	next, err := newElection(t, newLocker(t, store), "b").Campaign(ctx(t), "")
	if err != nil || next.Token() <= token {
		t.Fatalf("Campaign after Run returned = %v, %v; want a term after token %d", next, err, token)
	}
}

// TestRun_ContextEnds: fn's context ends with Run's; Run resigns and returns
// the context's error.
func TestRun_ContextEnds(t *testing.T) {
	store := memory.NewStore()
	e := newElection(t, newLocker(t, store), "a")
	rctx, cancel := context.WithCancel(ctx(t))
	err := election.Run(rctx, e, "", func(ctx context.Context, _ *election.Term) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if _, err := e.Leader(ctx(t)); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after Run returned = %v, want ErrNoLeader", err)
	}
}

// TestRun_FnReturns_CampaignsAgain: fn returning nil resigns; Run leads
// again, in a later term.
func TestRun_FnReturns_CampaignsAgain(t *testing.T) {
	e := newElection(t, newLocker(t, memory.NewStore()), "a")
	rctx, cancel := context.WithCancel(ctx(t))
	var tokens []uint64
	err := election.Run(rctx, e, "", func(_ context.Context, term *election.Term) error {
		if tokens = append(tokens, term.Token()); len(tokens) == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if len(tokens) != 3 || tokens[0] >= tokens[1] || tokens[1] >= tokens[2] {
		t.Fatalf("terms led: %v, want three in increasing order", tokens)
	}
}

// TestRun_TermLost_CancelsFn: the Locker closes under a running fn; fn's
// context is cancelled with the loss as its cause, and Run, which cannot
// campaign on a closed Locker, returns ErrClosed.
func TestRun_TermLost_CancelsFn(t *testing.T) {
	l, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	e := newElection(t, l, "a")
	var cause error
	err = election.Run(ctx(t), e, "", func(ctx context.Context, term *election.Term) error {
		if err := l.Close(); err != nil {
			return err
		}
		<-ctx.Done()
		cause = context.Cause(ctx)
		if err := term.Proclaim(context.Background(), "late"); !errors.Is(err, locker.ErrLeaseLost) {
			t.Errorf("Proclaim of a lost term = %v, want ErrLeaseLost", err)
		}
		return ctx.Err()
	})
	if !errors.Is(cause, locker.ErrLeaseLost) {
		t.Errorf("fn's context cause = %v, want ErrLeaseLost", cause)
	}
	if !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("Run = %v, want ErrClosed", err)
	}
}

// TestRun_FnPanics_Resigns: the panic goes on up, and the lead is given up.
func TestRun_FnPanics_Resigns(t *testing.T) {
	store := memory.NewStore()
	e := newElection(t, newLocker(t, store), "a")
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Run swallowed fn's panic")
			}
		}()
		_ = election.Run(ctx(t), e, "", func(context.Context, *election.Term) error { panic("job") })
	}()
	if _, err := e.Leader(ctx(t)); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader after fn panicked = %v, want ErrNoLeader", err)
	}
}

// TestObserve_SlowReceiver_CoalescesInOrder: leaders change while nobody
// receives; the observer then sees fewer changes, never an older term, and
// ends at the current leader.
func TestObserve_SlowReceiver_CoalescesInOrder(t *testing.T) {
	store := memory.NewStore()
	octx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	seen := newElection(t, newLocker(t, store), "observer").Observe(octx)
	e := newElection(t, newLocker(t, store), "a")
	var term *election.Term
	for i := range 10 {
		var err error
		if term, err = e.Campaign(ctx(t), string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
		if i < 9 {
			if err := term.Resign(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var last election.Leader
	for last.Token != term.Token() {
		select {
		case ld := <-seen:
			if ld.Token <= last.Token {
				t.Fatalf("observed token %d after %d", ld.Token, last.Token)
			}
			last = ld
		case <-time.After(opTimeout):
			t.Fatalf("the current leader (token %d) not observed; last %+v", term.Token(), last)
		}
	}
	if last.Value != "j" || last.Label != "a" {
		t.Fatalf("observed %+v, want value j, label a", last)
	}
}

// TestObserve_LockerClosed_ClosesChannel: watching cannot go on, so the
// channel closes before the context ends.
func TestObserve_LockerClosed_ClosesChannel(t *testing.T) {
	l, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	seen := newElection(t, l, "observer").Observe(ctx(t))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-seen:
		if ok {
			t.Fatal("observed a leader of an election nobody campaigned in")
		}
	case <-time.After(opTimeout):
		t.Fatal("Observe's channel still open after the Locker closed")
	}
}

// TestObserve_ContextEnds_ClosesChannel: the goroutine ends with ctx
// (TestMain checks that none is left).
func TestObserve_ContextEnds_ClosesChannel(t *testing.T) {
	octx, cancel := context.WithCancel(ctx(t))
	seen := newElection(t, newLocker(t, memory.NewStore()), "observer").Observe(octx)
	cancel()
	for range seen {
	}
}
