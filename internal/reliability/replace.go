package reliability

import (
	"testing"
	"time"
)

// replaceFaults replace a follower, or the leader, of an etcd cluster or a
// ZooKeeper ensemble (3 members) by a fresh member, as an operator replaces
// a failed machine; replace is the cluster's ReplaceEtcdMember or
// ReplaceZooKeeperMember. The member goes (etcd: removed from the
// membership), a new one with an empty data directory joins (on the old
// one's slow disk, emptied) and catches up from the others, and every
// client slot's proxy to the member follows it to its new address. A
// majority keeps its data throughout: within the guarantee. The
// replacement is the fault, and takes seconds (the new member must serve
// before it returns); nothing is left to heal.
// replaceRun is how long the clients of a run under a replacement start
// operations: through a whole replacement (etcd: 3–17 s here, mostly 8–10
// s, under -race; ZooKeeper 3–6 s), so that they meet the new member and
// their proxies' retargeting, not only the removal.
const replaceRun = 20 * time.Second

func replaceFaults(d *Deployment, replace func(testing.TB, int)) []Fault {
	inject := func(which func(*Harm) int) func(*Harm) {
		return func(h *Harm) {
			i := which(h)
			// Not retried like h.Do: a replacement that failed half-way
			// (the old member gone) cannot start over.
			replace(h.TB, i)
			// d.servers shares c.Nodes's array: servers[i] is the new
			// member.
			for _, slot := range d.slots {
				h.Do(func(tb testing.TB) { slot[i].Retarget(tb, d.servers[i].Addr()) })
			}
		}
	}
	return []Fault{
		{Name: "replace a follower", Inject: inject((*Harm).follower), Hold: time.Millisecond, RunFor: replaceRun},
		{Name: "replace the leader", Inject: inject((*Harm).leader), Hold: time.Millisecond, RunFor: replaceRun},
	}
}
