//go:build unix

package procfault_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// TestProcessFaults runs every process fault on every backend but memory
// (see the package doc), one server (or Redlock's 3 masters) each; the
// holder is built once.
func TestProcessFaults(t *testing.T) {
	bin := buildHolder(t)
	t.Run("redis", func(t *testing.T) { redisFaults(t, bin) })
	t.Run("redlock", func(t *testing.T) { redlockFaults(t, bin) })
	t.Run("etcd", func(t *testing.T) { etcdFaults(t, bin) })
	t.Run("zookeeper", func(t *testing.T) { zookeeperFaults(t, bin) })
	t.Run("postgres", func(t *testing.T) { postgresFaults(t, bin) })
}

func redisFaults(t *testing.T, bin string) {
	s := testenv.Redis(t)
	p := s.Proxy(t)
	q := "/0?prefix=pf:" + fresh() + ":"
	// A crashed holder's lock lives its TTL (redis package doc).
	run(t, bin, backend{ttl: time.Second, holderURL: "redis://" + p.Addr() + q, directURL: "redis://" + s.Addr() + q,
		proxies: []*testenv.Proxy{p}, store: "redis", storeAddr: s.Addr(), bound: ttlBound, nextTTL: nextHolderTTL})
}

func redlockFaults(t *testing.T, bin string) {
	c := testenv.RedisMasters(t, 3)
	var via []string
	var ps []*testenv.Proxy
	for _, n := range c.Nodes {
		p := n.Proxy(t)
		ps = append(ps, p)
		via = append(via, p.Addr())
	}
	q := "/?redlock=true&prefix=pf:" + fresh() + ":"
	// The lock lives its TTL on each master; the fenced resource is kept
	// on the first master, reached directly. The test's own Locker and the
	// holder process give each master a third of the TTL, as the
	// conformance harness does: the default tenth (100 ms) is missed by all
	// three at once now and then on a loaded machine, which fails the
	// round (a loaded fresh-clone run of 2026-12-03 saw a holder's Acquire
	// fail so, three rounds of three i/o timeouts, at load 37).
	q += "&node_timeout=333ms"
	run(t, bin, backend{ttl: time.Second, holderURL: "redis://" + strings.Join(via, ",") + q,
		directURL: "redis://" + strings.Join(c.Addrs(), ",") + q,
		proxies:   ps, store: "redis", storeAddr: c.Nodes[0].Addr(), bound: ttlBound, nextTTL: nextHolderTTL})
}

func etcdFaults(t *testing.T, bin string) {
	s := testenv.Etcd(t)
	p := s.Proxy(t)
	prefix := "/pf-" + fresh() + "/"
	// A crashed holder's lock stays up to T+R after the last renewal,
	// R = max(1 s, ⌈T/5⌉), T the granted (whole-second) TTL (etcd package
	// doc).
	bound := func(ttl time.Duration) time.Duration {
		return ttl + max(time.Second, ((ttl/5)+time.Second-1).Truncate(time.Second))
	}
	run(t, bin, backend{ttl: time.Second, holderURL: "etcd://" + p.Addr() + prefix, directURL: "etcd://" + s.Addr() + prefix,
		proxies: []*testenv.Proxy{p}, store: "etcd", storeAddr: s.Addr(), bound: bound, nextTTL: nextHolderTTL})
}

func zookeeperFaults(t *testing.T, bin string) {
	s := testenv.ZooKeeper(t)
	p := s.Proxy(t)
	const ttl = 2 * time.Second
	q := "/pf-" + fresh() + "?session_timeout=" + ttl.String()
	// A crashed holder's lock lives the session timeout S, the TTL
	// (zookeeper package doc).
	run(t, bin, backend{ttl: ttl, holderURL: "zookeeper://" + p.Addr() + q, directURL: "zookeeper://" + s.Addr() + q,
		proxies: []*testenv.Proxy{p}, store: "zookeeper", storeAddr: s.Addr(), bound: ttlBound})
}

func postgresFaults(t *testing.T, bin string) {
	dsn := testenv.PostgresDB(t)
	p := testenv.Postgres(t).Proxy(t)
	via, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	via.Host = p.Addr()
	table := "pf_" + fresh()
	// A crashed holder's connection drops and its lock is free at once; a
	// silent one is cut off after the TTL (idle_in_transaction_session_timeout;
	// postgres package doc): the TTL bounds both.
	run(t, bin, backend{ttl: time.Second, holderURL: withQuery(t, via.String(), "table", table),
		directURL: withQuery(t, dsn, "table", table),
		proxies:   []*testenv.Proxy{p}, store: "postgres", storeAddr: dsn, bound: ttlBound, nextTTL: nextHolderTTL})
}
