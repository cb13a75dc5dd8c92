package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// TestInspect_LabelApplicationNameCannotHold_FromTheHolderRecord: a label
// too long, or not ASCII, for application_name is shown whole (from the
// holder record); a short ASCII one needs no record at all.
func TestInspect_LabelApplicationNameCannotHold_FromTheHolderRecord(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	admin := adminConn(t, dsn)
	other := newLocker(t, dsn)
	for _, label := range []string{"short-ascii", "Grüße aus Köln", strings.Repeat("long-label/", 20)} {
		l := newLocker(t, dsn, locker.WithOwner(label))
		k := randomKey("label")
		lease, err := l.TryAcquire(ctxT(t, 10*time.Second), k)
		if err != nil {
			t.Fatal(err)
		}
		info, err := locker.Inspect(ctxT(t, 10*time.Second), other, k)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Held || info.Owner != label || info.Token != lease.Token() {
			t.Fatalf("Inspect of a lock held WithOwner(%q) = %+v, want held by that label, token %d", label, info, lease.Token())
		}
		var records int
		if err := admin.QueryRow(ctxT(t, 10*time.Second), "SELECT count(*) FROM locker_locks WHERE key = decode('ff', 'hex') || $1::bytea", []byte(k)).Scan(&records); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[label == "short-ascii"]; records != want {
			t.Fatalf("holder records of a lock labelled %q: %d, want %d", label, records, want)
		}
		if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestInspect_ShowsWhatTheServerBoundsAndQueues: the time left is at most
// the TTL and more than nothing, the grant time is the server's, every
// queued Acquire is a waiter; a stale holder record (an earlier holder's
// value) is not shown.
func TestInspect_ShowsWhatTheServerBoundsAndQueues(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	a, b, c := newLocker(t, dsn), newLocker(t, dsn), newLocker(t, dsn)
	k := randomKey("inspect")
	first, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithValue("stale"))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	var serverNow time.Time
	if err := adminConn(t, dsn).QueryRow(ctxT(t, 10*time.Second), "SELECT now()").Scan(&serverNow); err != nil {
		t.Fatal(err)
	}
	lease, err := a.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	info, err := locker.Inspect(ctxT(t, 10*time.Second), c, k)
	if err != nil {
		t.Fatal(err)
	}
	if info.TTL <= 0 || info.TTL > time.Minute || info.Granted.Before(serverNow) || info.Value != "" {
		t.Fatalf("Inspect = %+v, want a time left in (0, 1m], granted after %v, no value", info, serverNow)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const waiters = 3
	ended := make(chan error, waiters)
	for range waiters {
		go func() {
			_, err := b.Acquire(ctx, k)
			ended <- err
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for info.Waiters != waiters && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		if info, err = locker.Inspect(ctxT(t, 10*time.Second), c, k); err != nil {
			t.Fatal(err)
		}
	}
	if info.Waiters != waiters {
		t.Fatalf("Inspect with %d acquisitions queued: Waiters = %d", waiters, info.Waiters)
	}
	cancel()
	for range waiters {
		if err := <-ended; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled waiter returned %v", err)
		}
	}
	if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestSchema_TableOfAnEarlierRelease_GainsTheRecordColumns: a lock table
// made before holder records existed (the key alone) is altered at first
// use, and values work on it.
func TestSchema_TableOfAnEarlierRelease_GainsTheRecordColumns(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	if _, err := adminConn(t, dsn).Exec(ctxT(t, 10*time.Second),
		"CREATE TABLE old_locks (key bytea PRIMARY KEY); INSERT INTO old_locks VALUES ('k'); "+
			"CREATE SEQUENCE old_locks_token AS bigint MINVALUE 1 NO CYCLE CACHE 1"); err != nil {
		t.Fatal(err)
	}
	l, other := newLocker(t, dsn, postgres.WithTable("old_locks")), newLocker(t, dsn, postgres.WithTable("old_locks"))
	lease, err := l.TryAcquire(ctxT(t, 10*time.Second), "k", locker.WithValue("v"))
	if err != nil {
		t.Fatal(err)
	}
	if info, err := locker.Inspect(ctxT(t, 10*time.Second), other, "k"); err != nil || info.Value != "v" || info.Token != lease.Token() {
		t.Fatalf("Inspect on an altered table = %+v, %v; want value v, token %d", info, err, lease.Token())
	}
}

// TestList_PagesByKeyAcrossUnheldRows: List walks every held lock under a
// prefix whatever the rows around them (free keys, holder records, keys
// just past the prefix).
func TestList_PagesByKeyAcrossUnheldRows(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	l, other := newLocker(t, dsn), newLocker(t, dsn)
	// 250 rows, one in ten held: more than one page of List's.
	var want []string
	for i := range 250 {
		k := "list/" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + "/" + randomKey("k")
		lease, err := l.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithValue("v"))
		if err != nil {
			t.Fatal(err)
		}
		if i%10 != 0 {
			if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Cleanup(func() { _ = lease.Release(context.Background()) })
		want = append(want, k)
	}
	if _, err := l.TryAcquire(ctxT(t, 10*time.Second), "list0"); err != nil { // '0' follows '/'
		t.Fatal(err)
	}
	got := map[string]bool{}
	for info, err := range locker.List(ctxT(t, 30*time.Second), other, "list/") {
		if err != nil {
			t.Fatal(err)
		}
		if got[info.Key] || !info.Held || info.Value != "v" {
			t.Fatalf("List yielded %+v (twice: %v)", info, got[info.Key])
		}
		got[info.Key] = true
	}
	for _, k := range want {
		if !got[k] {
			t.Fatalf("List(list/) missed %q", k)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("List(list/) yielded %d locks, want %d", len(got), len(want))
	}
}

// TestWatch_TakesAConnectionOfTheBudget: a watch pins a connection, so a
// Locker whose budget is taken cannot watch, and the connection comes back
// when the watch ends.
func TestWatch_TakesAConnectionOfTheBudget(t *testing.T) {
	u, err := url.Parse(testenv.PostgresDB(t))
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = "max_conns=1"
	l, err := locker.Open(ctxT(t, 10*time.Second), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.TryAcquire(ctxT(t, 10*time.Second), "held")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range locker.Watch(ctxT(t, 10*time.Second), l, "k") {
		if !errors.Is(err, postgres.ErrPoolExhausted) {
			t.Fatalf("Watch with the budget taken = %v, want ErrPoolExhausted", err)
		}
		break
	}
	if err := lease.Release(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	for info, err := range locker.Watch(ctx, l, "k") {
		if err != nil || info.Held {
			t.Fatalf("Watch of a free key = %+v, %v", info, err)
		}
		break
	}
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for {
		lease, err := l.TryAcquire(ctxT(t, 10*time.Second), "after")
		if err == nil {
			_ = lease.Release(ctxT(t, 10*time.Second))
			break
		}
		if !errors.Is(err, postgres.ErrPoolExhausted) || time.Now().After(deadline) {
			t.Fatalf("TryAcquire after the watch ended = %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatch_HolderSessionTerminated_SeenWhenItsTimeIsUp: a lock whose
// session the server ends is freed at once, and notified by nobody; the
// watch sees it free when the holder's time left has run out, not later.
func TestWatch_HolderSessionTerminated_SeenWhenItsTimeIsUp(t *testing.T) {
	dsn := testenv.PostgresDB(t)
	admin := adminConn(t, dsn)
	holder, watcher := newLocker(t, dsn), newLocker(t, dsn)
	k := randomKey("terminated")
	const ttl = 2 * time.Second
	if _, err := holder.TryAcquire(ctxT(t, 10*time.Second), k, locker.WithTTL(ttl), locker.WithOwner("terminated")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	states := make(chan locker.LockInfo, 16)
	go func() {
		defer close(states)
		for info, err := range locker.Watch(ctx, watcher, k) {
			if err != nil {
				return
			}
			states <- info
		}
	}()
	if info := <-states; !info.Held {
		t.Fatalf("Watch began with %+v, want held", info)
	}
	var ok bool
	if err := admin.QueryRow(ctxT(t, 10*time.Second), "SELECT pg_terminate_backend($1)", holderPID(t, admin, "terminated")).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend = %v, %v", ok, err)
	}
	// The bound: the TTL, and the watch's own margin with room for load.
	select {
	case info, open := <-states:
		if !open || info.Held {
			t.Fatalf("Watch showed %+v (open %v) after the holder's session ended, want free", info, open)
		}
	case <-time.After(ttl + 5*time.Second):
		t.Fatalf("Watch did not show the key free within %v of the holder's session ending", ttl+5*time.Second)
	}
}
