package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/redis"
	goredis "github.com/redis/go-redis/v9"
)

// harness gives the suite Lockers over fresh clients of one deployment.
type harness struct {
	ttl     time.Duration
	prefix  string // fresh per harness: runs never see each other's keys
	redlock bool
	// connect makes fresh clients: one of the deployment at addrs (a server,
	// Cluster seeds), or one per Redlock master.
	connect func(addrs []string) []goredis.UniversalClient
	addrs   []string
	opts    []locker.Option // before the suite's own

	mu      sync.Mutex
	clients map[locker.Locker][]goredis.UniversalClient
}

func newHarness(addrs []string, redlock bool, connect func([]string) []goredis.UniversalClient) *harness {
	return &harness{ttl: 2 * time.Second, prefix: testPrefix(), redlock: redlock, connect: connect, addrs: addrs,
		clients: map[locker.Locker][]goredis.UniversalClient{}}
}

func testPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "test:" + hex.EncodeToString(b[:]) + ":"
}

// connectSingle makes a client of one server that honours contexts.
func connectSingle(addrs []string) []goredis.UniversalClient {
	return []goredis.UniversalClient{goredis.NewClient(&goredis.Options{Addr: addrs[0], ContextTimeoutEnabled: true})}
}

// connectCluster makes a Cluster client from seed addresses.
func connectCluster(addrs []string) []goredis.UniversalClient {
	return []goredis.UniversalClient{goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})}
}

// connectMasters makes a client per Redlock master: no retries, which the
// quorum replaces.
func connectMasters(addrs []string) []goredis.UniversalClient {
	cs := make([]goredis.UniversalClient, len(addrs))
	for i, a := range addrs {
		cs[i] = goredis.NewClient(&goredis.Options{Addr: a, ContextTimeoutEnabled: true, MaxRetries: -1})
	}
	return cs
}

func (h *harness) newLocker(addrs []string, opts ...locker.Option) (locker.Locker, []goredis.UniversalClient, error) {
	// A third of the TTL rather than the default tenth: five masters in
	// containers on a busy 2-core CI machine miss 100 ms now and then,
	// and a release that misses its quorum fails the contention test.
	return h.newLockerTimeout(addrs, h.ttl/3, opts...)
}

// newLockerTimeout is newLocker with Redlock's node timeout nodeTimeout.
func (h *harness) newLockerTimeout(addrs []string, nodeTimeout time.Duration, opts ...locker.Option) (locker.Locker, []goredis.UniversalClient, error) {
	opts = append(append([]locker.Option{redis.WithPrefix(h.prefix), redis.CloseClients()}, h.opts...), opts...)
	cs := h.connect(addrs)
	if h.redlock {
		l, err := redis.NewRedlock(cs, append(opts, redis.WithNodeTimeout(nodeTimeout))...)
		return l, cs, err
	}
	l, err := redis.New(cs[0], opts...)
	return l, cs, err
}

func (h *harness) NewLocker(_ context.Context, _ *testing.T, opts ...locker.Option) (locker.Locker, error) {
	l, cs, err := h.newLocker(h.addrs, opts...)
	if err != nil {
		for _, c := range cs {
			c.Close()
		}
		return nil, err
	}
	h.mu.Lock()
	h.clients[l] = cs
	h.mu.Unlock()
	return l, nil
}

func (h *harness) TTL() time.Duration { return h.ttl }

// Crash closes the Locker's clients under it: it can no longer reach Redis,
// and its locks stay there until their PX expiry.
func (h *harness) Crash(_ *testing.T, l locker.Locker) {
	h.mu.Lock()
	cs := h.clients[l]
	h.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// NewUnreachableLocker points at a closed port (every master, for Redlock).
//
// Redlock's TryAcquire on masters that all refuse runs failedRounds (3)
// rounds of at most a node timeout each, with a random pause of up to one
// and then two node timeouts between them: at most six node timeouts. The
// suite allows 3 s; the contention tests' node timeout (a third of the
// 2 s TTL) would promise up to 4 s, and took 3.4 s once on a loaded
// machine. The default node timeout (a tenth of the TTL, at most 250 ms)
// promises at most 1.2 s here: room for a load that more than doubles it.
func (h *harness) NewUnreachableLocker(_ context.Context, t *testing.T) (locker.Locker, error) {
	addrs := make([]string, len(h.addrs))
	for i := range addrs {
		addrs[i] = closedAddr(t)
	}
	l, _, err := h.newLockerTimeout(addrs, redis.DefaultNodeTimeout(h.ttl))
	return l, err
}

func TestConformance_Single(t *testing.T) {
	srv := testenv.Redis(t)
	conformance.Run(t, newHarness([]string{srv.Addr()}, false, connectSingle))
}

func TestConformance_Cluster(t *testing.T) {
	c := testenv.RedisCluster(t)
	conformance.Run(t, newHarness(c.Addrs(), false, connectCluster))
}

func TestConformance_Redlock(t *testing.T) {
	c := testenv.RedisMasters(t, 5)
	conformance.Run(t, newHarness(c.Addrs(), true, connectMasters))
}
