package reliability

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/distlock/locker/internal/slowdisk"
	"github.com/distlock/locker/internal/testenv"
)

// The fault catalogue. Every fault heals completely; what differs between
// backends is which faults lie within their stated guarantee.

// clientFaults cut one client (one proxy slot) off, both ways or one,
// reset its connections, or slow its answers down: the client↔server path,
// the server untouched. Every one but the latency ends with the slot's
// connections closed (the reset at once, the others at their heal); closed,
// if not empty, is why those lie outside the deployment's guarantee.
func clientFaults(d *Deployment, closed string) []Fault {
	onSlot := func(name string, outside string, do func(*testenv.Proxy, testing.TB)) Fault {
		return Fault{Name: name, Outside: outside, Inject: func(h *Harm) {
			for _, p := range h.slot() {
				h.Do(func(tb testing.TB) { do(p, tb) })
				h.Undo(p.Heal)
			}
		}}
	}
	return []Fault{
		onSlot("client blackhole", closed, (*testenv.Proxy).Blackhole),
		onSlot("client reset", closed, (*testenv.Proxy).ResetPeer),
		onSlot("client latency", "", func(p *testenv.Proxy, tb testing.TB) { p.Latency(tb, d.TTL/4) }),
		// One-way partitions: the server runs what it hears and the client
		// hears nothing; or the client is not heard.
		onSlot("client replies dropped", closed, (*testenv.Proxy).DropReplies),
		onSlot("client requests dropped", closed, (*testenv.Proxy).DropRequests),
	}
}

// slot picks one client slot at random.
func (h *Harm) slot() []*testenv.Proxy { return h.D.slots[h.Rng.IntN(len(h.D.slots))] }

// serverFaults pause, kill and restart a single server. persistent says
// whether the server keeps its data over a restart (all but Redis here).
func serverFaults(d *Deployment, persistent bool) []Fault {
	s := d.server()
	restartAtOnce := Fault{Name: "server kill+restart", Inject: func(h *Harm) {
		h.Undo(s.Restart)
		h.Do(s.Kill)
	}, Hold: time.Millisecond}
	if !persistent {
		// Restarting takes about a second here: a TTL longer than that
		// lets a restart forget locks whose holders still hold them.
		restartAtOnce.TTL = 3 * time.Second
		restartAtOnce.Outside = "Redis without persistence restarts empty: it forgets held locks and grants them again " +
			"(tokens stay monotonic, floored by the server clock)"
	}
	return []Fault{
		{Name: "server pause", Inject: func(h *Harm) {
			h.Undo(s.Unpause)
			h.Do(s.Pause)
		}},
		{Name: "server kill, restart after TTL", Inject: func(h *Harm) {
			h.Undo(s.Restart)
			h.Do(s.Kill)
		}, MinHold: d.TTL + 100*time.Millisecond},
		restartAtOnce,
	}
}

// diskFault stalls a single server's disk: its log flushes wait, and so does
// every write, while the server goes on answering what needs none (reads;
// on etcd, lease renewals, which the leader grants from memory). When the
// disk resumes, the writes land at once, and etcd's lessor may revoke
// every lease whose renewals could not be applied meanwhile (etcd#15247):
// a holder must have seen its loss by then.
func diskFault(disk *slowdisk.Disk) Fault {
	return Fault{Name: "disk stall", Inject: func(h *Harm) { stall(h, disk) }}
}

// stall stalls disk until the fault heals.
func stall(h *Harm, disk *slowdisk.Disk) {
	h.Do(func(testing.TB) { disk.Stall() })
	h.Undo(func(testing.TB) { disk.Resume() })
}

// linkFaults drop the packets between the members of a cluster whose peers
// talk through toxiproxies, the connections left open: the leader or a
// follower isolated and, where cut is given (etcd), one-way cuts — the
// leader unheard by its followers while it hears them, and the followers
// unheard by the leader while they hear it.
func linkFaults(d *Deployment, isolate func(testing.TB, int), heal func(testing.TB), cut func(testing.TB, int, int)) []Fault {
	c := d.cluster
	fs := []Fault{
		{Name: "leader isolated, packets dropped", Inject: func(h *Harm) {
			l := h.leader()
			h.Do(func(tb testing.TB) { isolate(tb, l) })
			h.Undo(heal)
		}},
		{Name: "follower isolated, packets dropped", Inject: func(h *Harm) {
			f := h.follower()
			h.Do(func(tb testing.TB) { isolate(tb, f) })
			h.Undo(heal)
		}},
	}
	if cut == nil {
		return fs
	}
	// cutLeader cuts one direction between the leader and every follower.
	cutLeader := func(h *Harm, fromLeader bool) {
		l := h.leader()
		h.Undo(heal)
		for f := range c.Nodes {
			if f == l {
				continue
			}
			if fromLeader {
				h.Do(func(tb testing.TB) { cut(tb, l, f) })
			} else {
				h.Do(func(tb testing.TB) { cut(tb, f, l) })
			}
		}
	}
	return append(fs,
		Fault{Name: "leader unheard by its followers", Inject: func(h *Harm) { cutLeader(h, true) }},
		Fault{Name: "followers unheard by the leader", Inject: func(h *Harm) { cutLeader(h, false) }},
	)
}

// clockJump steps a server's wall clock by d for the fault's hold, and back
// when it heals; outside says why that lies outside the guarantee, if it
// does.
func clockJump(name string, c *testenv.Clock, d time.Duration, outside string) Fault {
	return clockStep(name, func(*Harm) *testenv.Clock { return c }, d, true, outside)
}

// clockStep steps by d the wall clock of the server that which picks at
// each injection and, if undo, steps it back when the fault heals.
func clockStep(name string, which func(*Harm) *testenv.Clock, d time.Duration, undo bool, outside string) Fault {
	return Fault{Name: name, Outside: outside, Inject: func(h *Harm) {
		c := which(h)
		h.Do(func(tb testing.TB) { c.Jump(tb, d) })
		if undo {
			h.Undo(func(tb testing.TB) { c.Jump(tb, -d) })
		}
	}}
}

// redisClockFaults move a Redis server's wall clock, by which it expires
// keys. A step ahead past the TTL frees held locks at once: outside the
// guarantee (the tokens still rise, floored by the counter). A step back
// makes keys outlive their TTL by the step, and the TIME floor of the
// tokens fall behind the counter: within it. Neither is undone, since
// undoing one is the other: a step ahead undone by a step back made a key
// granted while the clock was ahead outlive the liveness bound (a CI run:
// "not acquirable within 5s after the run"). The steps add up over a run.
func redisClockFaults(d *Deployment, c *testenv.Clock) []Fault {
	server := func(*Harm) *testenv.Clock { return c }
	return []Fault{
		clockStep("server clock 10 TTLs ahead", server, 10*d.TTL, false,
			"Redis expires keys by its wall clock: a step ahead frees held locks early (tokens still rise, the fence holds)"),
		clockStep("server clock stepped back a TTL", server, -d.TTL, false, ""),
	}
}

// redlockClockFaults move one master's wall clock. A step ahead past the
// TTL frees its keys at once: a lock held on exactly a majority that
// includes it can then be granted to another majority — outside the
// guarantee, which assumes the masters' clocks advance at about the same
// rate. A step back (never undone) only makes its keys outlive their TTL.
//
// Rates: Redlock's validity leaves a drift margin of TTL/100 + 2 ms
// (driver.DriftMargin), so masters whose clocks run up to 1 % fast or slow
// are within the guarantee — one master fast and another slow at once, the
// skew between masters; a master whose clock runs twice as fast frees its
// keys in half the TTL, outside it. A rate is undone at heal, keeping the
// offset the clock reached (undoing that would be a step back).
func redlockClockFaults(d *Deployment, clocks []*testenv.Clock) []Fault {
	one := func(h *Harm) *testenv.Clock { return clocks[h.pick(1)[0]] }
	return []Fault{
		clockStep("one master clock 10 TTLs ahead", one, 10*d.TTL, true, "Redlock assumes the masters' clocks advance at about the same "+
			"rate: a master whose clock steps ahead frees its keys early, and a lock held on exactly a majority can be granted again"),
		clockStep("one master clock stepped back a TTL", one, -d.TTL, false, ""),
		clockRates("masters' clocks 1% fast and 1% slow", clocks, 10_000, -10_000, ""),
		clockRates("one master clock twice as fast", clocks, 1_000_000, 0, "Redlock assumes the masters' clocks advance at about the same "+
			"rate (its drift margin is 1 %): a master whose clock runs twice as fast frees its keys in half the TTL"),
	}
}

// clockRates sets one master's clock running fast by fast parts per
// million and, if slow is not 0, another's by slow, until the fault heals.
func clockRates(name string, clocks []*testenv.Clock, fast, slow int64, outside string) Fault {
	return Fault{Name: name, Outside: outside, Inject: func(h *Harm) {
		picked := h.pick(2)
		for i, ppm := range []int64{fast, slow} {
			if ppm == 0 {
				continue
			}
			c := clocks[picked[i]]
			h.Do(func(tb testing.TB) { c.SetRate(tb, ppm) })
			h.Undo(func(tb testing.TB) { c.SetRate(tb, 0) })
		}
	}}
}

// leader returns the index of the cluster's leader now.
func (h *Harm) leader() int {
	c := h.D.cluster
	return slices.Index(c.Nodes, c.Leader(h.TB))
}

// follower returns the index of one of the cluster's followers, at random.
func (h *Harm) follower() int {
	n := len(h.D.cluster.Nodes)
	return (h.leader() + 1 + h.Rng.IntN(n-1)) % n
}

// pick returns k distinct servers of d at random.
func (h *Harm) pick(k int) []int {
	return h.Rng.Perm(len(h.D.servers))[:k]
}

// redlockFaults break some of Redlock's independent masters: paused, cut
// off from one client, killed (restarted empty).
func redlockFaults(d *Deployment) []Fault {
	var fs []Fault
	for _, k := range []int{2, 3} {
		fs = append(fs,
			Fault{Name: fmt.Sprintf("pause %d of 5 masters", k), Inject: func(h *Harm) {
				for _, i := range h.pick(k) {
					s := h.D.servers[i]
					h.Undo(s.Unpause)
					h.Do(s.Pause)
				}
			}},
			Fault{Name: fmt.Sprintf("client cut from %d of 5 masters", k), Inject: func(h *Harm) {
				slot := h.slot()
				for _, i := range h.pick(k) {
					h.Do(slot[i].Blackhole)
					h.Undo(slot[i].Heal)
				}
			}},
		)
	}
	kill := func(h *Harm) {
		for _, i := range h.pick(2) {
			s := h.D.servers[i]
			h.Undo(s.Restart)
			h.Do(s.Kill)
		}
	}
	fs = append(fs,
		Fault{Name: "kill 2 of 5 masters, restart after TTL", Inject: kill, MinHold: d.TTL + 100*time.Millisecond},
		Fault{Name: "kill 2 of 5 masters, restart at once", Inject: kill, Hold: time.Millisecond, TTL: 3 * time.Second,
			Outside: "Redlock without persistence needs restarts delayed past the TTL: a master restarted at once forgets " +
				"the locks it granted, and a lock held on exactly a majority can be granted again"},
	)
	return fs
}

// clusterFaults partition and crash members of an etcd cluster or a
// ZooKeeper ensemble (3 members), and cut a client off. pausedLeader, if
// not empty, is why pausing the leader lies outside the deployment's
// guarantee.
func clusterFaults(d *Deployment, pausedLeader string) []Fault {
	c := d.cluster
	follower := func(h *Harm) *testenv.Server { return c.Nodes[h.follower()] }
	// The heal is registered first: a Disconnect that reported an error
	// may still have cut the member off. Reconnecting a member that is on
	// its network does nothing.
	disconnect := func(h *Harm, s *testenv.Server) {
		h.Undo(s.Reconnect)
		h.Do(s.Disconnect)
	}
	return []Fault{
		clientFaults(d, "")[0],
		{Name: "partition a follower", Inject: func(h *Harm) { disconnect(h, follower(h)) }},
		{Name: "partition the leader", Inject: func(h *Harm) { disconnect(h, c.Leader(h.TB)) }},
		{Name: "partition a majority", Inject: func(h *Harm) {
			f := follower(h)
			disconnect(h, c.Leader(h.TB))
			disconnect(h, f)
		}},
		{Name: "pause the leader", Outside: pausedLeader, Inject: func(h *Harm) {
			l := c.Leader(h.TB)
			h.Undo(l.Unpause)
			h.Do(l.Pause)
		}},
		{Name: "kill the leader, restart", Inject: func(h *Harm) {
			l := c.Leader(h.TB)
			h.Undo(l.Restart)
			h.Do(l.Kill)
		}, Hold: time.Millisecond},
		// The leader keeps its role (its heartbeats need no disk) while
		// nothing commits: the etcd#15247 case.
		{Name: "leader disk stall", Inject: func(h *Harm) {
			stall(h, c.Disks[h.leader()])
		}},
	}
}

// crashBehind steps a PostgreSQL server's clock a TTL back and kills it;
// it restarts two TTLs later, and then its clock is stepped ahead again.
// A crash can lose the sequence's last advances (a lock transaction never
// commits), and the token floor (the sequence raised to the server clock
// in µs on a new server life) covers them provided the clock at the restart
// is later than when the last tokens before the crash were taken
// (docs/design/postgres.md): here it is, by a TTL, although the clock went
// back — the documented bound, exercised. A crash loses only the WAL not
// yet written (about the last page), so in a run it may lose nothing;
// postgres's TestCrashClockBack_TokenFloor makes the loss certain.
func crashBehind(d *Deployment, c *testenv.Clock) Fault {
	s := d.server()
	return Fault{Name: "server clock a TTL behind, killed, restarted after 2 TTLs", MinHold: 2 * d.TTL, Outside: pgClockHealsAhead, Inject: func(h *Harm) {
		h.Do(func(tb testing.TB) { c.Jump(tb, -d.TTL) })
		h.Undo(func(tb testing.TB) { c.Jump(tb, d.TTL) })
		h.Undo(s.Restart)
		h.Do(s.Kill)
	}}
}
