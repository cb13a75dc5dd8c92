package redis_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/bounds"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// The same master given twice is one master. Redlock over A, A and a dead
// master has one live master of two distinct ones: it must not grant. Fewer
// than 3 distinct masters are refused unless the caller asks for them.
func TestRedlock_SameMasterTwice_CountsOnce(t *testing.T) {
	addr := testenv.Redis(t).Addr()
	dead := closedAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prefix := testPrefix()

	// outcome is what Open or the constructor said, or else what a
	// TryAcquire on the Locker said; it closes the Locker.
	outcome := func(l locker.Locker, err error) error {
		if err != nil {
			return err
		}
		defer l.Close()
		lease, err := l.TryAcquire(ctx, "k")
		if err == nil {
			lease.Release(ctx)
			return errors.New("granted")
		}
		return err
	}

	u := "redlock://" + addr + "," + addr + "," + dead + "?prefix=" + prefix
	if err := outcome(locker.Open(ctx, u)); !errors.Is(err, locker.ErrInvalidURL) {
		t.Errorf("Open(redlock://A,A,dead) = %v, want ErrInvalidURL: 2 distinct masters, fewer than 3", err)
	}
	// Asked for: 2 distinct masters, quorum 2, one of them dead.
	if err := outcome(locker.Open(ctx, u+"&allow_few_masters=true")); !errors.Is(err, locker.ErrUnavailable) {
		t.Errorf("Open(redlock://A,A,dead?allow_few_masters=true) = %v, want ErrUnavailable: 1 live master of 2", err)
	}

	c1, c2, d := masterClient(t, addr), masterClient(t, addr), masterClient(t, dead)
	for name, cs := range map[string][]goredis.UniversalClient{
		"one client twice":           {c1, c1, d},
		"two clients of one address": {c1, c2, d},
	} {
		err := outcome(redis.NewRedlock(cs, redis.WithPrefix(prefix)))
		if !errors.Is(err, locker.ErrInvalidOption) {
			t.Errorf("%s, and a dead master: NewRedlock = %v, want ErrInvalidOption: 2 distinct masters, fewer than 3", name, err)
		}
		err = outcome(redis.NewRedlock(cs, redis.WithPrefix(prefix), redis.WithAllowFewMasters(true)))
		if !errors.Is(err, locker.ErrUnavailable) {
			t.Errorf("%s, and a dead master, WithAllowFewMasters(true): TryAcquire = %v, want ErrUnavailable: 1 live master of 2", name, err)
		}
	}
}

// masterClient is a client of one Redlock master as connectMasters makes
// it, closed with t.
func masterClient(t testing.TB, addr string) goredis.UniversalClient {
	c := connectMasters([]string{addr})[0]
	t.Cleanup(func() { c.Close() })
	return c
}

// A master that accepts connections and never answers costs a round no more
// than the node timeout, whatever the options of the caller's clients: with
// 2 healthy masters of 3 and a 2 s TTL, TryAcquire gets the lock. (go-redis
// ignores context deadlines unless the client has ContextTimeoutEnabled;
// such a client may instead be refused at construction, with an error that
// says so.)
func TestRedlock_SilentMaster_CostsNoMoreThanTheNodeTimeout(t *testing.T) {
	c := testenv.RedisMasters(t, 3)
	addrs := c.Addrs()
	p := c.Nodes[2].Proxy(t)
	addrs[2] = p.Addr()
	p.Blackhole(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second

	for _, ctxTimeout := range []bool{false, true} {
		cs := make([]goredis.UniversalClient, len(addrs))
		for i, a := range addrs {
			cs[i] = goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: ctxTimeout, MaxRetries: -1})
		}
		l, err := redis.NewRedlock(cs, redis.WithPrefix(testPrefix()), redis.CloseClients(), locker.WithTTL(ttl))
		if err != nil {
			for _, c := range cs {
				c.Close()
			}
			if !ctxTimeout && errors.Is(err, locker.ErrInvalidOption) && strings.Contains(err.Error(), "ContextTimeoutEnabled") {
				continue
			}
			t.Fatalf("ContextTimeoutEnabled=%v: NewRedlock = %v", ctxTimeout, err)
		}
		start := time.Now()
		lease, err := l.TryAcquire(ctx, "k")
		if err != nil {
			l.Close()
			t.Fatalf("ContextTimeoutEnabled=%v: TryAcquire with 2 of 3 masters healthy, 1 silent, TTL %v = %v after %v, want the lock",
				ctxTimeout, ttl, err, time.Since(start).Round(time.Millisecond))
		}
		// A release that finds no majority within the node timeout (a
		// loaded CI run: all three masters timed out) leaves the lease as it
		// was: try again, as a caller would.
		err = lease.Release(ctx)
		for i := 0; i < 3 && errors.Is(err, locker.ErrUnavailable); i++ {
			err = lease.Release(ctx)
		}
		if err != nil {
			t.Errorf("ContextTimeoutEnabled=%v: Release = %v", ctxTimeout, err)
		}
		l.Close()
	}
}

// An acquisition that fails while every master is frozen leaves no lock
// behind once they resume. Its requests sit on the frozen masters' sockets
// and run when they resume, after the error has returned; the clean-up by
// owner id goes on in the background until it has removed them. Close stops
// that clean-up: no goroutine outlives the Locker.
func TestRedlock_AllMastersFrozen_NoPhantomHoldAfterResume(t *testing.T) {
	c := testenv.RedisMasters(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = time.Minute // how long a phantom hold would last
	prefix := testPrefix()
	newLocker := func() locker.Locker {
		l, err := redis.NewRedlock(connectMasters(c.Addrs()), redis.WithPrefix(prefix), redis.CloseClients(), locker.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	waiter, closed, other := newLocker(), newLocker(), newLocker()
	// Open a connection to each master, so that the requests of the rounds
	// below go out on it (a new connection would wait for its handshake).
	for _, l := range []locker.Locker{waiter, closed} {
		lease, err := l.Acquire(ctx, "warm-up")
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}

	paused := true
	for _, n := range c.Nodes {
		n.Pause(t)
	}
	resume := func() {
		if paused {
			paused = false
			for _, n := range c.Nodes {
				n.Unpause(t)
			}
		}
	}
	defer resume()
	errs := make(chan error, 2)
	for l, key := range map[locker.Locker]string{waiter: "k", closed: "c"} {
		go func() {
			actx, acancel := context.WithTimeout(ctx, 2*time.Second)
			defer acancel()
			_, err := l.Acquire(actx, key)
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err == nil {
			t.Fatal("Acquire with every master frozen got the lock")
		}
	}
	// Both clean-ups run, and go on while the masters are frozen; Close
	// ends one. A clean-up's goroutine exists once Acquire has returned,
	// but shows its clean-up frame only once scheduled, which a loaded
	// machine can delay: wait for it, within a bound far above that.
	const scheduled = 30 * time.Second
	start := time.Now()
	for n := settlers(); n != 2; n = settlers() {
		if time.Since(start) > scheduled {
			t.Fatalf("%d clean-ups running %v after two failed acquisitions, want 2", n, scheduled)
		}
		time.Sleep(10 * time.Millisecond)
	}
	bounds.Took(t, "both clean-ups scheduled", time.Since(start), scheduled)
	closed.Close()
	if n := settlers(); n != 1 {
		t.Fatalf("%d clean-ups running after one of their Lockers closed, want 1", n)
	}
	resume()

	// A phantom hold keeps the key for the waiter's TTL after the resume.
	actx, acancel := context.WithTimeout(ctx, 15*time.Second)
	defer acancel()
	start = time.Now()
	lease, err := other.Acquire(actx, "k")
	if err != nil {
		var held []string
		for _, a := range c.Addrs() {
			held = append(held, lockKeys(t, a)...)
		}
		t.Fatalf("Acquire after the masters resumed = %v after %v; lock keys on the masters: %v", err, time.Since(start).Round(time.Millisecond), held)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waiter.Close()
	if n := settlers(); n != 0 {
		t.Fatalf("%d clean-ups running after their Lockers closed", n)
	}
}

// settlers counts the goroutines running a Redlock clean-up.
func settlers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			count := 0
			for _, g := range strings.Split(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "github.com/distlock/locker/redis.(*redlock).settle.func") {
					count++
				}
			}
			return count
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Two majorities of 3 masters can meet in one master; if that master lost
// its counter, the later majority must still see the earlier token. Masters
// A, B, C; B's counter is far ahead (as a clock ahead would make it); X is
// granted on {A, B} with B's token, C refusing (another owner holds the key
// there); A restarts without persistence; Y is granted on {A, C}, B
// refusing. Y's token must be above X's: the token was written back to every
// master that answered X's round, C included.
func TestRedlock_MajoritiesMeetInARestartedMaster_TokensStillIncrease(t *testing.T) {
	c := testenv.RedisMasters(t, 3)
	addrs := c.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := testPrefix()
	const ttl = 10 * time.Second
	l, err := redis.NewRedlock(connectMasters(addrs), redis.WithPrefix(prefix), redis.CloseClients(),
		redis.WithNodeTimeout(2*time.Second), locker.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lockKey, fenceKey := keyNames(prefix, "k")

	ahead := time.Now().Add(24 * time.Hour).UnixMicro()
	if err := direct(t, addrs[1]).Set(ctx, fenceKey, ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	plantGrant(t, ctx, addrs[2], prefix, "k", "z", ttl)
	x, err := l.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("X on {A, B}: %v", err)
	}
	if x.Token() <= uint64(ahead) {
		t.Fatalf("X's token %d is not B's (above %d)", x.Token(), ahead)
	}
	if err := x.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := direct(t, addrs[2]).Del(ctx, lockKey).Err(); err != nil {
		t.Fatal(err)
	}

	c.Nodes[0].Kill(t)
	c.Nodes[0].Restart(t)
	plantGrant(t, ctx, addrs[1], prefix, "k", "z", ttl)
	var y locker.Lease
	for range 5 { // the Locker's connection to A died with it
		if y, err = l.TryAcquire(ctx, "k"); err == nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("Y on {A, C}: %v", err)
	}
	defer y.Release(ctx)
	if y.Token() <= x.Token() {
		t.Fatalf("Y's token %d is not above X's %d: the majorities {A, B} and {A, C} met in A, which lost its counter", y.Token(), x.Token())
	}
}

// An uncontended Redlock acquire is one request to each master: the masters
// take the client's hint as their proposal, all propose the same token, and
// none needs it written back (issue 22: Redlock at redsync's speed).
func TestRedlock_Uncontended_OneRequestPerMaster(t *testing.T) {
	c := testenv.RedisMasters(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := redis.NewRedlock(connectMasters(c.Addrs()), redis.WithPrefix(testPrefix()), redis.CloseClients(),
		redis.WithNodeTimeout(2*time.Second), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// scripts counts the scripts each master has run (EVALSHA, and EVAL
	// for a script it did not have yet).
	scripts := func() []int {
		var n []int
		for _, a := range c.Addrs() {
			info, err := direct(t, a).Info(ctx, "commandstats").Result()
			if err != nil {
				t.Fatal(err)
			}
			calls := 0
			for _, line := range strings.Split(info, "\n") {
				for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
					if rest, ok := strings.CutPrefix(line, cmd); ok {
						v, _, _ := strings.Cut(rest, ",")
						x, _ := strconv.Atoi(v)
						calls += x
					}
				}
			}
			n = append(n, calls)
		}
		return n
	}
	// The first acquisition loads the script on each master (EVALSHA
	// refused, then EVAL): count from the second.
	for i := range 4 {
		before := scripts()
		lease, err := l.TryAcquire(ctx, fmt.Sprint("k", i))
		if err != nil {
			t.Fatal(err)
		}
		after := scripts()
		for m := range after {
			if i == 0 {
				break
			}
			if d := after[m] - before[m]; d != 1 {
				t.Errorf("acquire %d: master %d ran %d scripts, want 1", i, m, d)
			}
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Redlock refreshes every lease on every master. Asked for at once, the
// refreshes of many leases share pipelines: each was a round trip of its own
// per master, and at 10⁴ held leases their client CPU was more than the
// machine had (issue 22).
//
// A refresh returns once a quorum of masters answered, so the last
// master's scripts may run after every Refresh returned: master 0 answers
// 300 ms late here, and the counts are read once they have settled (a
// loaded CI run counted 260 of 300 on a master read at once).
func TestRedlock_ConcurrentRefreshes_SharePipelines(t *testing.T) {
	const n = 300
	c := testenv.RedisMasters(t, 3)
	slow := c.Nodes[0].Proxy(t)
	addrs := append([]string{slow.Addr()}, c.Addrs()[1:]...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := redis.NewRedlock(connectMasters(addrs), redis.WithPrefix(testPrefix()), redis.CloseClients(),
		redis.WithNodeTimeout(5*time.Second), locker.WithAutoRefresh(false), locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	leases := make([]locker.Lease, n)
	for i := range leases {
		if leases[i], err = l.TryAcquire(ctx, fmt.Sprint("k", i)); err != nil {
			t.Fatal(err)
		}
	}
	// stats returns, per master, the read events the server processed (a
	// pipeline is read in few) and the scripts it ran.
	var admins []*goredis.Client
	for _, a := range c.Addrs() {
		admins = append(admins, direct(t, a)) // one connection each: an INFO is one read
	}
	stats := func() (reads, scripts []int) {
		for _, admin := range admins {
			info, err := admin.Info(ctx, "stats", "commandstats").Result()
			if err != nil {
				t.Fatal(err)
			}
			r, s := 0, 0
			for _, line := range strings.Split(info, "\n") {
				line = strings.TrimSpace(line)
				if v, ok := strings.CutPrefix(line, "total_reads_processed:"); ok {
					r, _ = strconv.Atoi(v)
				}
				for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
					if rest, ok := strings.CutPrefix(line, cmd); ok {
						v, _, _ := strings.Cut(rest, ",")
						x, _ := strconv.Atoi(v)
						s += x
					}
				}
			}
			reads, scripts = append(reads, r), append(scripts, s)
		}
		return reads, scripts
	}
	slow.Latency(t, 300*time.Millisecond)
	// The first refresh loads refresh.lua on each master (EVALSHA
	// refused, then EVAL): count from the next ones.
	if err := leases[0].Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	// settled reads the stats until the scripts run stop changing, and
	// says how many times it read them (each INFO is a read of its own).
	settled := func() (reads, scripts []int, infos int) {
		reads, scripts = stats()
		for infos = 1; ; infos++ {
			time.Sleep(time.Second) // past master 0's latency
			r, s := stats()
			if slices.Equal(s, scripts) {
				return r, s, infos + 1
			}
			reads, scripts = r, s
		}
	}
	reads0, scripts0, _ := settled()
	errs := make(chan error, n)
	for _, lease := range leases {
		go func() { errs <- lease.Refresh(ctx) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Refresh: %v", err)
		}
	}
	reads1, scripts1, infos := settled()
	slow.Heal(t)
	for m := range reads1 {
		// The reads of the INFOs count here too.
		ran, read := scripts1[m]-scripts0[m], reads1[m]-reads0[m]-infos
		t.Logf("master %d: %d refreshes in %d reads", m, ran, read)
		if ran != n {
			t.Errorf("master %d ran %d scripts for %d refreshes, want %d", m, ran, n, n)
		}
		if read > n/4 {
			t.Errorf("master %d read %d times for %d refreshes asked for at once, want them pipelined (at most %d reads)", m, read, n, n/4)
		}
	}
	for _, lease := range leases {
		_ = lease.Release(ctx)
	}
}

// A refresh returns once its verdict is decided: with 2 healthy masters of
// 3, their answers make the quorum, and the silent master's call goes on to
// its deadline (a third of the TTL) in the background. Nor does the next
// refresh wait behind that call: a master's calls are sent in batches, one
// at a time, and the silent master's next batch waits for the stuck one.
// With a 60 s TTL, each of three refreshes in a row must return before a
// quarter of it, where waiting for the silent master would take a third;
// and so must Close.
func TestRedlock_SilentMaster_RefreshReturnsOnQuorum(t *testing.T) {
	c := testenv.RedisMasters(t, 3)
	addrs := c.Addrs()
	p := c.Nodes[2].Proxy(t)
	addrs[2] = p.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ttl = time.Minute
	// No read timeout of the client's own (go-redis's default is 5 s): the
	// silent master's call lasts until its deadline.
	cs := make([]goredis.UniversalClient, len(addrs))
	for i, a := range addrs {
		cs[i] = goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1, ReadTimeout: -1})
	}
	l, err := redis.NewRedlock(cs, redis.WithPrefix(testPrefix()), redis.CloseClients(),
		locker.WithTTL(ttl), locker.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			l.Close()
		}
	}()
	lease, err := l.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	p.Blackhole(t)
	bound := ttl / 4
	for i := range 3 {
		start := time.Now()
		err := lease.Refresh(ctx)
		took := time.Since(start)
		bounds.Took(t, fmt.Sprintf("refresh %d with a silent master", i+1), took, bound)
		if err != nil {
			t.Fatalf("refresh %d with 2 of 3 masters healthy = %v", i+1, err)
		}
		if took >= bound {
			t.Fatalf("refresh %d with 2 of 3 masters healthy took %v, want it back on their quorum, before %v (the silent master's call ends after %v)",
				i+1, took.Round(time.Millisecond), bound, ttl/3)
		}
	}
	// Nor does Close wait for the silent master: the Locker owns its
	// clients and closes their connections, the stuck one included.
	start := time.Now()
	closed = true
	if err := l.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	took := time.Since(start)
	bounds.Took(t, "Close with a silent master's refresh in flight", took, bound)
	if took >= bound {
		t.Errorf("Close with a silent master's refresh in flight took %v, want it not to wait for that call (it ends after %v)",
			took.Round(time.Millisecond), ttl/3)
	}
}

// A burst of load can make a majority of masters miss the node timeout once
// (a CI run at load 36: Proclaim failed with 4 of 5 masters past it). Like
// a grant's, a publish's or a release's round whose verdict waits on those
// masters runs again, to them only (failedRounds in all), rather than
// failing the caller: a publish is one more write under a valid lease, the
// same value written twice is written once, and a master that granted the
// lock and holds nothing when a release asks again was released by the
// first request, run late. Before, both failed as unavailable, and a
// caller's second Release reported the lease lost (the masters released by
// the first answered that they held nothing). Here two of three masters are
// frozen through the first round and thawed during the next ones.
func TestRedlock_MajorityMissesTheNodeTimeoutOnce_RoundRunsAgain(t *testing.T) {
	for _, op := range []string{"Publish", "Release"} {
		t.Run(op, func(t *testing.T) {
			c := testenv.RedisMasters(t, 3)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const nodeTimeout = time.Second
			l, err := redis.NewRedlock(connectMasters(c.Addrs()), redis.WithPrefix(testPrefix()), redis.CloseClients(),
				redis.WithNodeTimeout(nodeTimeout), locker.WithTTL(time.Minute), locker.WithAutoRefresh(false))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			lease, err := l.Acquire(ctx, "k", locker.WithValue("v0"))
			if err != nil {
				t.Fatal(err)
			}
			frozen := c.Nodes[1:]
			for _, n := range frozen {
				n.Pause(t)
			}
			done := make(chan error, 1)
			go func() {
				if op == "Publish" {
					done <- locker.Publish(ctx, lease, "v1")
				} else {
					done <- lease.Release(ctx)
				}
			}()
			// Thawed after the first round's node timeout: the next round
			// starts within one more node timeout of it and waits a node
			// timeout for its answers, the third within two more.
			time.Sleep(nodeTimeout + nodeTimeout/2)
			for _, n := range frozen {
				n.Unpause(t)
			}
			if err := <-done; err != nil {
				t.Fatalf("%s with a majority frozen through its first round = %v, want it done once they answer", op, err)
			}
			info, err := locker.Inspect(ctx, l, "k")
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case op == "Publish" && (info.Value != "v1" || info.Token != lease.Token()):
				t.Fatalf("Inspect after Publish = value %q token %d, want %q under token %d", info.Value, info.Token, "v1", lease.Token())
			case op == "Release" && info.Held:
				t.Fatalf("Inspect after Release = %+v, want the lock free", info)
			}
		})
	}
}
