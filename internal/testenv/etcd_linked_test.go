package testenv_test

import (
	"testing"
	"time"

	"github.com/distlock/locker/internal/testenv"
)

// A member isolated by packet drops, or cut from the leader in one
// direction, takes no writes while the majority does; Heal brings it back.
//
// The premise is that the leader stays the leader through a fault, which
// a loaded machine can break by itself: a leader starved of the CPU past
// etcd's election timeout (1 s) is replaced, and a follower cut from the
// old leader then hears the new one and takes writes (a fresh-clone run at
// load 25 failed "not hearing the leader follower accepted a write"). A
// fault during which the leader changed is tried again, with the roles
// drawn afresh, up to three times; a write accepted while the leader held
// still fails the test.
func TestEtcdClusterLinked_IsolateCutHeal(t *testing.T) {
	t.Parallel()
	cl := testenv.EtcdClusterLinked(t)
	if err := etcdPut(etcdClient(t, cl.Addrs()...), 10*time.Second, "/k"); err != nil {
		t.Fatal(err)
	}
	for _, fault := range []struct {
		name   string
		inject func(l, f int)
	}{
		{"isolated", func(_, f int) { cl.Isolate(t, f) }},
		{"not hearing the leader", func(l, f int) { cl.Cut(t, l, f) }},
		{"not heard by the leader", func(l, f int) { cl.Cut(t, f, l) }},
	} {
		for attempt := 1; ; attempt++ {
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
			fault.inject(l, f)
			if err := etcdPut(mc, 10*time.Second, "/majority"); err != nil {
				t.Fatalf("%s follower: majority not writable: %v", fault.name, err)
			}
			minorityErr := etcdPut(fc, 3*time.Second, "/minority")
			after := cl.Leader(t)
			cl.Heal(t)
			eventually(t, 30*time.Second, func() error { return etcdPut(fc, 3*time.Second, "/minority") })
			if minorityErr != nil {
				break
			}
			if after == leader || attempt == 3 {
				t.Fatalf("%s follower accepted a write (leader member %d before the fault, %s after)", fault.name, l+1, after.Addr())
			}
			t.Logf("%s: the leader changed during the fault (member %d, then %s); trying again", fault.name, l+1, after.Addr())
		}
	}
}
