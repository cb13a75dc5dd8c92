package testenv_test

import (
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// A member isolated by packet drops, or cut from the leader in one
// direction, takes no writes while the majority does; Heal brings it back.
func TestEtcdClusterLinked_IsolateCutHeal(t *testing.T) {
	t.Parallel()
	cl := testenv.EtcdClusterLinked(t)
	if err := etcdPut(etcdClient(t, cl.Addrs()...), 10*time.Second, "/k"); err != nil {
		t.Fatal(err)
	}
	leader := cl.Leader(t)
	f, l := -1, -1
	var majority []string
	for i, n := range cl.Nodes {
		switch {
		case n == leader:
			l = i
			majority = append(majority, n.Addr())
		case f < 0:
			f = i
		default:
			majority = append(majority, n.Addr())
		}
	}
	fc := etcdClient(t, cl.Nodes[f].Addr())
	mc := etcdClient(t, majority...)
	for _, fault := range []struct {
		name   string
		inject func()
	}{
		{"isolated", func() { cl.Isolate(t, f) }},
		{"not hearing the leader", func() { cl.Cut(t, l, f) }},
		{"not heard by the leader", func() { cl.Cut(t, f, l) }},
	} {
		fault.inject()
		if err := etcdPut(mc, 10*time.Second, "/majority"); err != nil {
			t.Fatalf("%s follower: majority not writable: %v", fault.name, err)
		}
		if err := etcdPut(fc, 3*time.Second, "/minority"); err == nil {
			t.Fatalf("%s follower accepted a write", fault.name)
		}
		cl.Heal(t)
		eventually(t, 30*time.Second, func() error { return etcdPut(fc, 3*time.Second, "/minority") })
	}
}
