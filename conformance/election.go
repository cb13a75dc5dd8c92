package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/election"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/bounds"
)

// Leader election (package election) is built over the portable API, so
// its promises are checked on every backend: campaigning and resigning on
// all of them, Leader where the backend inspects, Observe where it
// watches, values and Proclaim where it publishes.

func init() {
	add("Election_OneLeaderAtATime_FencedTermsIncrease", testElectionExclusive)
	add("Election_Resign_HandsOverToWaitingCandidate", testElectionResign)
	add("Election_LeaderLost_SuccessorLeads_StaleWriteRefused", testElectionLost)
	addIf[Crasher]("Election_LeaderCrashes_ReplacedWithinTTL", "Crasher", testElectionCrash)
	inspecting := func(s *suite) bool { return s.inspects }
	addWhen("Election_Leader_ShowsLabelTokenValue", "inspection", inspecting, testElectionLeader)
	addWhen("Election_CancelledCampaign_LeavesNothingBehind", "inspection", inspecting, testElectionCancelled)
	watching := func(s *suite) bool { return s.watches }
	addWhen("Election_Observe_SeesTwentyLeadersInOrder", "watches", watching, testElectionObserve)
	addWhen("Election_Proclaim_ReachesObservers", "watches and published values",
		func(s *suite) bool { return s.watches && s.publishes }, testElectionProclaim)
}

// candidate returns an Election on a new client of its own.
func (s *suite) candidate(t *testing.T, name, label string) *election.Election {
	t.Helper()
	e, err := election.New(s.locker(t), name, election.WithTTL(s.ttl), election.WithLabel(label))
	if err != nil {
		t.Fatalf("election.New: %v", err)
	}
	return e
}

func (s *suite) campaign(t *testing.T, e *election.Election, value string) *election.Term {
	t.Helper()
	term, err := e.Campaign(s.ctx(t, s.opTimeout()), value)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	return term
}

func (s *suite) resign(t *testing.T, term *election.Term) {
	t.Helper()
	if err := term.Resign(s.ctx(t, s.opTimeout())); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

// value is what a candidate campaigns with: v where the backend publishes
// values, else nothing.
func (s *suite) value(v string) string {
	if s.publishes {
		return v
	}
	return ""
}

// testElectionExclusive: candidates on four clients each lead three terms
// through election.Run; a leader counts itself in and out and writes to a
// fenced resource with its term's token. Never two leaders at once, every
// leader's write is admitted, and terms strictly increase in write order.
func testElectionExclusive(t *testing.T, s *suite) {
	const candidates, terms = 4, 3
	name := key(t, "election")
	guard := fencing.NewMemory()
	var (
		leaders atomic.Int32
		counter atomic.Int64
		mu      sync.Mutex
		tokens  []uint64 // in write order
		wg      sync.WaitGroup
	)
	errs := make(chan error, candidates*(terms+1))
	for i := range candidates {
		e := s.candidate(t, name, fmt.Sprintf("candidate-%d", i))
		ctx, cancel := context.WithCancel(s.ctx(t, 4*s.opTimeout()))
		led := 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			err := election.Run(ctx, e, s.value(fmt.Sprint(i)), func(_ context.Context, term *election.Term) error {
				if n := leaders.Add(1); n > 1 {
					errs <- fmt.Errorf("%d leaders at once (token %d)", n, term.Token())
				}
				// The guard's own context: a write of a term lost meanwhile
				// must still be judged by its token.
				err := guard.Write(s.ctx(t, s.opTimeout()), name, term.Token(), func() error {
					mu.Lock()
					tokens = append(tokens, term.Token())
					mu.Unlock()
					v := counter.Load()
					runtime.Gosched()
					counter.Store(v + 1)
					return nil
				})
				leaders.Add(-1)
				if err != nil {
					errs <- fmt.Errorf("the guard refused the leader (token %d): %w", term.Token(), err)
				}
				if led++; led == terms {
					cancel() // Run resigns, then returns
				}
				return nil
			})
			if !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("Run = %v, want context.Canceled after %d terms", err, terms)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := counter.Load(); got != candidates*terms {
		t.Errorf("counter = %d, want %d: two leaders overlapped", got, candidates*terms)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("term #%d has token %d after %d: terms must strictly increase", i, tokens[i], tokens[i-1])
		}
	}
}

// testElectionResign: a candidate waits while another leads, and leads as
// soon as the leader resigns (the leader's term refreshes itself, so
// nothing but the resignation frees the lead).
func testElectionResign(t *testing.T, s *suite) {
	name := key(t, "election")
	a, b := s.candidate(t, name, "a"), s.candidate(t, name, "b")
	first := s.campaign(t, a, s.value("a"))

	var resigned atomic.Bool
	type result struct {
		term  *election.Term
		err   error
		early bool
		at    time.Time
	}
	got := make(chan result, 1)
	go func() {
		term, err := b.Campaign(s.ctx(t, s.opTimeout()), s.value("b"))
		got <- result{term, err, !resigned.Load(), time.Now()}
	}()
	// Long enough for the candidate to be queued; the result must not
	// depend on it.
	time.Sleep(s.ttl / 4)
	resigned.Store(true)
	at := time.Now()
	s.resign(t, first)

	r := <-got
	bounds.Took(t, "the waiting candidate led after the resignation", r.at.Sub(at), s.ttl+s.slack)
	switch {
	case r.err != nil:
		t.Fatalf("Campaign after the leader resigned: %v", r.err)
	case r.early:
		t.Fatal("Campaign returned while the other candidate still led")
	case r.term.Token() <= first.Token():
		t.Fatalf("token of the next term %d, want > %d", r.term.Token(), first.Token())
	case r.at.Sub(at) > s.ttl+s.slack:
		t.Fatalf("the waiting candidate led %v after the resignation, more than TTL %v + slack %v", r.at.Sub(at), s.ttl, s.slack)
	}
	if !isClosed(first.Done()) || !errors.Is(first.Err(), locker.ErrReleased) {
		t.Fatalf("resigned term: Done closed %v, Err %v; want closed, ErrReleased", isClosed(first.Done()), first.Err())
	}
	if err := first.Resign(s.ctx(t, s.opTimeout())); err != nil {
		t.Fatalf("second Resign = %v, want nil", err)
	}
	if err := r.term.Err(); err != nil {
		t.Fatalf("the new leader's Err = %v after the old one resigned twice", err)
	}
	s.resign(t, r.term)
}

// testElectionLost: the leader's client goes away (its Locker closed: the
// term is lost, as on any loss the backend reports); its Done closes, the
// waiting candidate leads with a larger token, and the old leader's late
// write is refused by the fenced resource.
func testElectionLost(t *testing.T, s *suite) {
	name := key(t, "election")
	la := s.locker(t)
	a, err := election.New(la, name, election.WithTTL(s.ttl))
	if err != nil {
		t.Fatal(err)
	}
	b := s.candidate(t, name, "b")
	guard := fencing.NewMemory()
	old := s.campaign(t, a, "")
	if err := guard.Admit(s.ctx(t, s.opTimeout()), name, old.Token()); err != nil {
		t.Fatalf("the guard refused the first leader: %v", err)
	}
	next := make(chan *election.Term, 1)
	go func() {
		term, err := b.Campaign(s.ctx(t, s.opTimeout()), "")
		if err != nil {
			t.Errorf("Campaign after the leader was lost: %v", err)
		}
		next <- term
	}()
	time.Sleep(s.ttl / 4)
	if err := la.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !isClosed(old.Done()) || !errors.Is(old.Err(), locker.ErrLeaseLost) {
		t.Fatalf("term of a closed Locker: Done closed %v, Err %v; want closed, ErrLeaseLost", isClosed(old.Done()), old.Err())
	}
	term := <-next
	if term == nil {
		return
	}
	s.checkSuccessor(t, guard, name, old, term)
}

// checkSuccessor: the next term has a larger token, the guard admits it
// and refuses the old leader's late write.
func (s *suite) checkSuccessor(t *testing.T, guard *fencing.Memory, resource string, old, next *election.Term) {
	t.Helper()
	if next.Token() <= old.Token() {
		t.Fatalf("successor's token %d, want > %d", next.Token(), old.Token())
	}
	if err := guard.Admit(s.ctx(t, s.opTimeout()), resource, next.Token()); err != nil {
		t.Fatalf("the guard refused the successor: %v", err)
	}
	if err := guard.Admit(s.ctx(t, s.opTimeout()), resource, old.Token()); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("the old leader's late write = %v, want ErrStaleToken", err)
	}
	s.resign(t, next)
}

// testElectionCrash: the leader's client dies without resigning while the
// leader works in election.Run; a waiting candidate leads within the TTL
// and the backend's slack, the dead leader's work is cancelled with the
// loss as its cause, and its late write is refused.
func testElectionCrash(t *testing.T, s *suite) {
	name := key(t, "election")
	la := s.locker(t)
	a, err := election.New(la, name, election.WithTTL(s.ttl))
	if err != nil {
		t.Fatal(err)
	}
	b := s.candidate(t, name, "b")
	guard := fencing.NewMemory()

	// a leads in Run; its fn reports the term, then how its context ended.
	runCtx, stopRun := context.WithCancel(s.ctx(t, 2*s.opTimeout()))
	defer stopRun()
	terms, causes, ran := make(chan *election.Term, 1), make(chan error, 1), make(chan error, 1)
	go func() {
		ran <- election.Run(runCtx, a, "", func(ctx context.Context, term *election.Term) error {
			select {
			case terms <- term:
			default:
				return nil // a later term: the test is over
			}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		})
	}()
	var old *election.Term
	select {
	case old = <-terms:
	case <-time.After(s.opTimeout()):
		t.Fatalf("Run did not lead within %v", s.opTimeout())
	}
	if err := guard.Admit(s.ctx(t, s.opTimeout()), name, old.Token()); err != nil {
		t.Fatalf("the guard refused the first leader: %v", err)
	}
	type result struct {
		term *election.Term
		err  error
	}
	got := make(chan result, 1)
	go func() {
		term, err := b.Campaign(s.ctx(t, s.opTimeout()), "")
		got <- result{term, err}
	}()
	time.Sleep(s.ttl / 4)
	s.h.(Crasher).Crash(t, la)
	crashed := time.Now()

	var r result
	select {
	case r = <-got:
		bounds.Took(t, "new leader after the leader crashed", time.Since(crashed), s.ttl+s.slack)
	case <-time.After(s.ttl + s.slack):
		t.Fatalf("no new leader %v after the leader crashed (TTL %v + slack %v)", s.ttl+s.slack, s.ttl, s.slack)
	}
	if r.err != nil {
		t.Fatalf("Campaign after the leader crashed: %v", r.err)
	}
	t.Logf("new leader %v after the crash", time.Since(crashed).Round(time.Millisecond))
	waited := time.Now()
	select {
	case cause := <-causes:
		bounds.Took(t, "the crashed leader's work cancelled", time.Since(waited), s.ttl+s.slack)
		if !errors.Is(cause, locker.ErrLeaseLost) || !errors.Is(old.Err(), locker.ErrLeaseLost) {
			t.Fatalf("the crashed leader's work ended with cause %v, term Err %v; want ErrLeaseLost", cause, old.Err())
		}
	case <-time.After(s.ttl + s.slack):
		t.Fatalf("the crashed leader's work still not cancelled %v after the crash", s.ttl+s.slack)
	}
	s.checkSuccessor(t, guard, name, old, r.term)
	// The crashed candidate campaigns again (and cannot reach the
	// service) until its context ends.
	stopRun()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run of the crashed candidate = %v, want context.Canceled", err)
	}
}

// testElectionLeader: Leader reports ErrNoLeader, then the leader's label,
// token and value, then ErrNoLeader again after it resigned.
func testElectionLeader(t *testing.T, s *suite) {
	name := key(t, "election")
	a, obs := s.candidate(t, name, "leader-a"), s.candidate(t, name, "observer")
	if _, err := obs.Leader(s.ctx(t, s.opTimeout())); !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader before any campaign = %v, want ErrNoLeader", err)
	}
	term := s.campaign(t, a, s.value("serving at a"))
	ld, err := obs.Leader(s.ctx(t, s.opTimeout()))
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	if ld.Label != "leader-a" || ld.Token != term.Token() || ld.Value != s.value("serving at a") {
		t.Fatalf("Leader = %+v, want label leader-a, token %d, value %q", ld, term.Token(), s.value("serving at a"))
	}
	s.resign(t, term)
	end := time.Now().Add(s.opTimeout())
	for {
		_, err := obs.Leader(s.ctx(t, s.opTimeout()))
		if errors.Is(err, election.ErrNoLeader) {
			return
		}
		if err != nil || time.Now().After(end) {
			t.Fatalf("Leader after the leader resigned = %v, want ErrNoLeader", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testElectionCancelled: a campaign whose context ends while another
// candidate leads returns the context's error and leaves neither a waiter
// nor a holder of its own.
func testElectionCancelled(t *testing.T, s *suite) {
	name := key(t, "election")
	a, b := s.candidate(t, name, "a"), s.candidate(t, name, "b")
	inspector := s.locker(t)
	term := s.campaign(t, a, "")
	ctx := s.ctx(t, s.ttl/2)
	if got, err := b.Campaign(ctx, ""); !errors.Is(err, ctx.Err()) || ctx.Err() == nil {
		t.Fatalf("Campaign with an expiring context = (%v, %v), want the context's error", got, err)
	}
	info := s.inspectUntil(t, inspector, name, s.opTimeout(), func(i locker.LockInfo) bool { return i.Waiters <= 0 })
	if !info.Held || info.Token != term.Token() || info.Owner != "a" || info.Waiters > 0 {
		t.Fatalf("after a cancelled campaign: %+v, want held by a (token %d), no waiters", info, term.Token())
	}
	s.resign(t, term)
	if info := s.inspectUntil(t, inspector, name, s.opTimeout(), func(i locker.LockInfo) bool { return !i.Held }); info.Held {
		t.Fatalf("after the leader resigned: %+v, want free (the cancelled campaign left a holder)", info)
	}
}

// testElectionObserve: twenty leaders follow each other, on candidates of
// four clients; an observer on a client of its own sees each of them, in
// term order, each once. Each leader waits to be seen before it resigns, so
// no change may be coalesced away.
func testElectionObserve(t *testing.T, s *suite) {
	const leaders, clients = 20, 4
	name := key(t, "election")
	ctx := s.ctx(t, 4*s.opTimeout())
	seen := s.candidate(t, name, "observer").Observe(ctx)
	cands := make([]*election.Election, clients)
	for i := range cands {
		cands[i] = s.candidate(t, name, fmt.Sprintf("candidate-%d", i))
	}
	spare := s.candidate(t, name, "spare")
	var last election.Leader
	for i := range leaders {
		label, value := fmt.Sprintf("candidate-%d", i%clients), s.value(fmt.Sprintf("leader #%d", i))
		term := s.campaign(t, cands[i%clients], value)
		var ld election.Leader
		select {
		case l, ok := <-seen:
			if !ok {
				t.Fatalf("Observe closed after %d leaders", i)
			}
			ld = l
		case <-time.After(s.opTimeout()):
			t.Fatalf("leader #%d (token %d) not observed within %v; last seen %+v", i, term.Token(), s.opTimeout(), last)
		}
		// The previous leader was seen before it resigned, and nobody else
		// campaigns: the next change seen is this leader.
		if ld.Token != term.Token() || ld.Label != label || ld.Value != value {
			t.Fatalf("observed %+v after %+v, want leader #%d: token %d, label %s, value %q", ld, last, i, term.Token(), label, value)
		}
		if ld.Token <= last.Token {
			t.Fatalf("observed token %d after %d: terms must strictly increase", ld.Token, last.Token)
		}
		last = ld
		if i%5 == 0 {
			// A candidate that queues and gives up changes the lock's
			// waiters, not its leader: the observer must not repeat it.
			qctx, cancel := context.WithTimeout(ctx, s.ttl/4)
			if _, err := spare.Campaign(qctx, ""); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("a campaign while #%d leads = %v, want context.DeadlineExceeded", i, err)
			}
			cancel()
		}
		s.resign(t, term)
	}
}

// testElectionProclaim: the leader's proclaimed values reach an observer
// in order, under the same term, and Leader shows the last one.
func testElectionProclaim(t *testing.T, s *suite) {
	name := key(t, "election")
	ctx := s.ctx(t, 2*s.opTimeout())
	obs := s.candidate(t, name, "observer")
	seen := obs.Observe(ctx)
	term := s.campaign(t, s.candidate(t, name, "leader"), "v0")
	want := []string{"v0", "v1", "v2", "v3"}
	next := func() election.Leader {
		t.Helper()
		select {
		case ld, ok := <-seen:
			if !ok {
				t.Fatal("Observe closed")
			}
			if ld.Token != term.Token() {
				t.Fatalf("observed %+v, want the leader's token %d", ld, term.Token())
			}
			return ld
		case <-time.After(s.opTimeout()):
			t.Fatalf("no change observed within %v", s.opTimeout())
			return election.Leader{}
		}
	}
	if ld := next(); ld.Value != "v0" {
		t.Fatalf("observed %+v first, want the campaign's value v0", ld)
	}
	// await reads changes until want[i] is seen: the values seen must be
	// those proclaimed, in order, some perhaps coalesced away.
	got := 0
	await := func(i int) {
		t.Helper()
		for got < i {
			ld := next()
			j := slices.Index(want, ld.Value)
			if j <= got || j > i {
				t.Fatalf("observed value %q after %q; want the values proclaimed up to %q, in order", ld.Value, want[got], want[i])
			}
			got = j
		}
	}
	proclaim := func(v string) {
		t.Helper()
		if err := term.Proclaim(s.ctx(t, s.opTimeout()), v); err != nil {
			t.Fatalf("Proclaim(%q): %v", v, err)
		}
	}
	proclaim("v1")
	await(1)
	proclaim("v2")
	proclaim("v3") // two in a row: the observer may coalesce them
	await(3)
	if v := term.Value(); v != "v3" {
		t.Fatalf("Term.Value = %q, want v3", v)
	}
	if s.inspects {
		if ld, err := obs.Leader(s.ctx(t, s.opTimeout())); err != nil || ld.Value != "v3" || ld.Token != term.Token() {
			t.Fatalf("Leader = %+v, %v; want token %d, value v3", ld, err, term.Token())
		}
	}
	s.resign(t, term)
	if err := term.Proclaim(s.ctx(t, s.opTimeout()), "late"); err == nil {
		t.Fatal("Proclaim after Resign succeeded")
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
