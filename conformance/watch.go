package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/bounds"
)

// Watching (locker.Watch) and published values (locker.WithValue,
// locker.Publish) are optional abilities of a backend; these subtests run
// for every backend that has them. Package election is built on both.

func init() {
	watching := func(s *suite) bool { return s.watches && s.publishes }
	publishing := func(s *suite) bool { return s.publishes && s.inspects }
	addWhen("Publish_ValueSeenAndReplaced", "published values", publishing, testPublish)
	addWhen("Watch_SeesEveryChangeInOrder", "watching", watching, testWatchChanges)
	addWhen("Watch_SeesExpiry", "watching", watching, testWatchExpiry)
	addWhen("Watch_EndsWithContextAndClose", "watching", watching, testWatchEnds)
}

// testPublish: another client inspects the value a lease was granted with
// and the value it published; a released lease cannot publish.
func testPublish(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	lease := s.tryAcquire(t, a, k, locker.WithValue("first"))
	if info := s.inspectUntil(t, b, k, s.opTimeout(), func(i locker.LockInfo) bool { return i.Value == "first" }); info.Value != "first" {
		t.Fatalf("Inspect of a lease granted WithValue(first) = %+v", info)
	}
	if err := locker.Publish(s.ctx(t, s.opTimeout()), lease, "second"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if info := s.inspectUntil(t, b, k, s.opTimeout(), func(i locker.LockInfo) bool { return i.Value == "second" }); info.Value != "second" || info.Token != lease.Token() {
		t.Fatalf("Inspect after Publish(second) = %+v, want value second, token %d", info, lease.Token())
	}
	s.release(t, lease)
	if err := locker.Publish(s.ctx(t, s.opTimeout()), lease, "third"); !errors.Is(err, locker.ErrReleased) {
		t.Fatalf("Publish after Release = %v, want ErrReleased", err)
	}
	if err := locker.Publish(s.ctx(t, s.opTimeout()), s.tryAcquire(t, a, k), string([]byte{0xff})); !errors.Is(err, locker.ErrInvalidOption) {
		t.Fatalf("Publish of invalid UTF-8 = %v, want ErrInvalidOption", err)
	}
}

// watcher collects what locker.Watch yields on a goroutine that ends with
// the subtest; err is what ended the sequence, once ended is closed.
type watcher struct {
	states chan locker.LockInfo
	ended  chan struct{}
	err    error
}

func (s *suite) watch(t *testing.T, l locker.Locker, k string) (*watcher, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{states: make(chan locker.LockInfo, 64), ended: make(chan struct{})}
	go func() {
		defer close(w.ended)
		for info, err := range locker.Watch(ctx, l, k) {
			if err != nil {
				w.err = err
				return
			}
			w.states <- info
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-w.ended
	})
	return w, cancel
}

// next returns the first state the watcher yields that ok accepts, failing
// the subtest if none comes within d.
func (w *watcher) next(t *testing.T, d time.Duration, what string, ok func(locker.LockInfo) bool) locker.LockInfo {
	t.Helper()
	start, deadline := time.Now(), time.After(d)
	for {
		select {
		case info := <-w.states:
			if ok(info) {
				bounds.Took(t, "Watch showed "+what, time.Since(start), d)
				return info
			}
		case <-w.ended:
			t.Fatalf("Watch ended (%v) before it showed %s", w.err, what)
		case <-deadline:
			t.Fatalf("Watch did not show %s within %v", what, d)
		}
	}
}

// end waits up to d for the watch to end and returns what ended it.
func (w *watcher) end(t *testing.T, d time.Duration, after string) error {
	t.Helper()
	select {
	case <-w.ended:
		return w.err
	case <-time.After(d):
		t.Fatalf("Watch went on %v after %s", d, after)
		return nil
	}
}

// testWatchChanges: a watcher sees, in order, a grant with its value, a
// published value, the release, and the next holder's grant with a larger
// token — each change made only after the watcher saw the one before.
func testWatchChanges(t *testing.T, s *suite) {
	a, b, c := s.locker(t, locker.WithOwner("first-holder")), s.locker(t), s.locker(t)
	k := key(t, "k")
	w, _ := s.watch(t, c, k)
	bound := s.opTimeout()
	w.next(t, bound, "the free key", func(i locker.LockInfo) bool { return !i.Held })

	first := s.tryAcquire(t, a, k, locker.WithValue("v1"))
	got := w.next(t, bound, "the grant", func(i locker.LockInfo) bool { return i.Held })
	if got.Token != first.Token() || got.Value != "v1" || got.Owner != "first-holder" {
		t.Fatalf("Watch showed %+v after the grant, want token %d, value v1, owner first-holder", got, first.Token())
	}
	if err := locker.Publish(s.ctx(t, bound), first, "v2"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if got := w.next(t, bound, "the published value", func(i locker.LockInfo) bool { return i.Value != "v1" }); got.Value != "v2" || got.Token != first.Token() {
		t.Fatalf("Watch showed %+v after Publish(v2)", got)
	}
	s.release(t, first)
	w.next(t, bound, "the release", func(i locker.LockInfo) bool { return !i.Held })

	second := s.tryAcquire(t, b, k)
	got = w.next(t, bound, "the next grant", func(i locker.LockInfo) bool { return i.Held })
	if got.Token != second.Token() || got.Token <= first.Token() || got.Value != "" {
		t.Fatalf("Watch showed %+v after the second grant (token %d), want a larger token than %d and no value", got, second.Token(), first.Token())
	}
	s.release(t, second)
}

// testWatchExpiry: a holder that stops refreshing is seen to end within the
// TTL and the backend's expiry slack.
func testWatchExpiry(t *testing.T, s *suite) {
	a, b := s.locker(t), s.locker(t)
	k := key(t, "k")
	w, _ := s.watch(t, b, k)
	w.next(t, s.opTimeout(), "the free key", func(i locker.LockInfo) bool { return !i.Held })
	s.tryAcquire(t, a, k, locker.WithTTL(s.ttl), locker.WithAutoRefresh(false))
	w.next(t, s.opTimeout(), "the grant", func(i locker.LockInfo) bool { return i.Held })
	w.next(t, s.ttl+s.slack, "the expiry", func(i locker.LockInfo) bool { return !i.Held })
}

// testWatchEnds: a watch ends with its context's error when the context
// ends, and with ErrClosed when its Locker closes; its goroutines with it.
func testWatchEnds(t *testing.T, s *suite) {
	s.checkLeaks(t)
	a := s.locker(t)
	w, cancel := s.watch(t, a, key(t, "k"))
	w.next(t, s.opTimeout(), "the free key", func(i locker.LockInfo) bool { return !i.Held })
	cancel()
	if err := w.end(t, s.opTimeout(), "its context was cancelled"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch ended with %v after its context was cancelled, want context.Canceled", err)
	}

	l, err := s.h.NewLocker(s.ctx(t, s.opTimeout()), t)
	if err != nil {
		t.Fatalf("NewLocker: %v", err)
	}
	w, _ = s.watch(t, l, key(t, "closed"))
	w.next(t, s.opTimeout(), "the free key", func(i locker.LockInfo) bool { return !i.Held })
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.end(t, s.opTimeout(), "its Locker closed"); !errors.Is(err, locker.ErrClosed) {
		t.Fatalf("Watch ended with %v after its Locker closed, want ErrClosed", err)
	}
}
