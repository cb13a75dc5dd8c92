package etcd_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestOpen_URLPrefix_LocksLiveUnderIt opens a Locker from a URL and finds
// its lock under the URL's path prefix, attached to a lease.
func TestOpen_URLPrefix_LocksLiveUnderIt(t *testing.T) {
	srv := testenv.Etcd(t)
	h := newHarness(srv.Addr())
	prefix := h.prefix + "from-url"
	l, err := locker.Open(ctxFor(t, 10*time.Second), "etcd://"+srv.Addr()+"/"+prefix+"?request_timeout=2s&ttl=5s")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctxFor(t, 10*time.Second), "k/1")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	resp, err := h.newClient(t).Get(ctxFor(t, 10*time.Second), prefix+"/k%2F1\x00", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(resp.Kvs) != 1 || resp.Kvs[0].Lease == 0 || uint64(resp.Kvs[0].CreateRevision) != lease.Token() {
		t.Fatalf("keys under the URL's prefix: %v, want one leased key created at the token %d", resp.Kvs, lease.Token())
	}
	if err := lease.Release(ctxFor(t, 10*time.Second)); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func TestOpen_MalformedURL_ErrInvalidURL(t *testing.T) {
	for _, raw := range []string{"etcd://h1:notaport/", "etcd://h1/?nope=1", "etcd:///"} {
		if _, err := locker.Open(ctxFor(t, 5*time.Second), raw); !errors.Is(err, locker.ErrInvalidURL) {
			t.Errorf("Open(%q) = %v, want ErrInvalidURL", raw, err)
		}
	}
}
