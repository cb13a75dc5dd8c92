package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
)

// lockers opens k Lockers over one private memory Store, as k processes
// would share a server.
func lockers(t *testing.T, k int) *Subject {
	t.Helper()
	url := "memory://" + strings.ReplaceAll(t.Name(), "/", "-")
	var ls []locker.Locker
	for range k {
		l, err := locker.Open(context.Background(), url)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	s := Ours(url, "memory", ls[0])
	s.AddLockers(ls[1:]...)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestSemaphore_Memory_NeverMoreThanNHolders(t *testing.T) {
	s := lockers(t, 4)
	const n, contenders, ops = 4, 64, 600
	r, err := semaphore(context.Background(), s.permitMutexes(n), "sem", n, contenders, ops, sleeper(100*time.Microsecond), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Ops != ops || len(r.samples) != ops || r.Errors != 0 {
		t.Fatalf("ops %d, samples %d, errors %d (%s); want %d, %d, 0", r.Ops, len(r.samples), r.Errors, r.FirstError, ops, ops)
	}
	if r.OverLimit != 0 || r.Peak < 1 || r.Peak > n || r.Unsupported != "" {
		t.Errorf("peak %d, over limit %d, unsupported %q; want 1..%d holders, none over", r.Peak, r.OverLimit, r.Unsupported, n)
	}
	var v bytes.Buffer
	if !WriteVerdicts(&v, []*Result{r}) || !strings.HasPrefix(v.String(), "ok    semaphore on ") {
		t.Errorf("verdict %q; want ok", v.String())
	}
	// Every permit is back: n holders can take the key at once.
	for i := range n {
		lease, err := s.Others[i%len(s.Others)].TryAcquire(context.Background(), "sem", locker.WithLimit(n))
		if err != nil {
			t.Fatalf("permit %d after the run: %v", i+1, err)
		}
		defer lease.Release(context.Background())
	}
}

// TestSemaphore_OverAdmitting_Fails gives the workload a fake that admits
// n+1 holders and makes the first n+1 overlap: the counter must see it.
func TestSemaphore_OverAdmitting_Fails(t *testing.T) {
	const n = 4
	slots := make(chan struct{}, n+1)
	fake := mutexFunc(func(ctx context.Context, _ string) (Release, error) {
		select {
		case slots <- struct{}{}:
			return func(context.Context) error { <-slots; return nil }, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	// The first n+1 holds wait for each other: all of them are counted at
	// once, whatever the scheduling.
	var arrived atomic.Int64
	var together sync.WaitGroup
	together.Add(n + 1)
	hold := func() {
		if arrived.Add(1) <= n+1 {
			together.Done()
			together.Wait()
		}
	}
	r, err := semaphore(context.Background(), []Mutex{fake, fake}, "sem", n, 16, 200, hold, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Peak != n+1 || r.OverLimit < 1 {
		t.Errorf("peak %d, over limit %d; want %d holders counted, at least one grant over", r.Peak, r.OverLimit, n+1)
	}
	r.Subject = &Subject{Name: "fake"}
	var v bytes.Buffer
	if WriteVerdicts(&v, []*Result{r}) || !strings.HasPrefix(v.String(), fmt.Sprintf("FAIL  semaphore on fake: %d holders at once with %d permits", n+1, n)) {
		t.Errorf("verdict %q; want a failure", v.String())
	}
}

// TestSemaphore_Unsupported_ReportedNotFailed: a backend without permits
// (Redlock) refuses WithLimit with ErrUnsupported; the run says so and
// passes.
func TestSemaphore_Unsupported_ReportedNotFailed(t *testing.T) {
	refuse := mutexFunc(func(context.Context, string) (Release, error) {
		return nil, fmt.Errorf("redlock: %w: a limit of 4 holders (WithLimit)", locker.ErrUnsupported)
	})
	s := &Subject{Name: "redlock", Group: "redlock", Role: RoleOurs, Mutex: refuse, Locker: nil}
	r, err := semaphore(context.Background(), []Mutex{refuse}, "sem", 4, 64, 100, sleeper(0), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Subject, r.Workload = s, "semaphore"
	if r.Unsupported == "" || r.Ops != 0 {
		t.Fatalf("unsupported %q, ops %d; want the refusal, nothing measured", r.Unsupported, r.Ops)
	}
	var v bytes.Buffer
	if !WriteVerdicts(&v, []*Result{r}) || !strings.HasPrefix(v.String(), "n/a   semaphore on redlock: unsupported (") {
		t.Errorf("verdict %q; want n/a, not a failure", v.String())
	}
	var tb bytes.Buffer
	ResultsTable([]*Result{r}).WriteText(&tb)
	if !strings.Contains(tb.String(), "unsupported") {
		t.Errorf("table lacks \"unsupported\":\n%s", tb.String())
	}
}

func TestRun_Semaphore_SpreadsOverLockers(t *testing.T) {
	s := lockers(t, 3)
	c := testConfig()
	c.Workloads, c.SemOps, c.SemHold, c.Rounds = []string{KindSemaphore}, 100, 0, 2
	results, err := Run(context.Background(), c, []*Subject{s, {Name: "F", Role: RoleFloor, Mutex: s.Mutex}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("%d results, want 1 (floors take no permits)", len(results))
	}
	r := results[0]
	if r.Kind != KindSemaphore || r.Ops != 200 || r.Permits != 4 || r.Waiters != 64 || r.OverLimit != 0 {
		t.Errorf("%s: kind %s, ops %d, permits %d, contenders %d, over %d; want semaphore, 200, 4, 64, 0",
			r.Workload, r.Kind, r.Ops, r.Permits, r.Waiters, r.OverLimit)
	}
	if len(s.permitMutexes(4)) != 3 {
		t.Errorf("%d Mutexes for 3 Lockers", len(s.permitMutexes(4)))
	}
}
