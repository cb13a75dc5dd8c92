package testenv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/distlock/locker/internal/launch"
)

// ReplaceEtcdMember replaces member i of an etcd cluster by a fresh one,
// as an operator replaces a failed machine: MemberRemove through the
// others, the old container removed, MemberAdd of a new member (new name,
// new peer address, empty data directory) started with
// --initial-cluster-state=existing, and waited for until it is healthy.
// Nodes[i] is the new member afterwards; its client address is new too,
// so clients given the old addresses reach the others only.
func (c *Cluster) ReplaceEtcdMember(t testing.TB, i int) {
	t.Helper()
	start := time.Now()
	old, oc := c.member(t, i, "etcd", "ReplaceEtcdMember")
	var others []string
	for j, n := range c.Nodes {
		if j != i {
			others = append(others, n.Addr())
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: others, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("testenv: etcd client: %v", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if err := removeEtcdMember(ctx, cli, old.Addr()); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	old.remove()
	// The cluster token matters only to a new cluster's bootstrap; the
	// old member's is kept all the same.
	token := oc.Spec.Cmd[slices.Index(oc.Spec.Cmd, "--initial-cluster-token")+1]
	for attempt := 1; ; attempt++ {
		name, err := c.addEtcdMember(ctx, cli, i, oc.Spec, token)
		if err == nil {
			t.Logf("testenv: etcd member %s replaced by %s (%s) in %v", old.Addr(), name, c.Nodes[i].Addr(), time.Since(start).Round(time.Millisecond))
			return
		}
		if attempt == etcdJoinAttempts {
			t.Fatalf("testenv: %v", err)
		}
		t.Logf("testenv: %v; removed, adding another", err)
	}
}

// etcdJoinAttempts is how many fresh members ReplaceEtcdMember adds before it
// gives up. A new member that cannot catch up — under a soak's load one
// stayed more than 5,000 entries behind for minutes, its publication
// refused as "too many requests" — is removed again, or it would stay in
// the membership, never started, and fail every later removal ("unhealthy
// cluster").
const etcdJoinAttempts = 2

// addEtcdMember adds a fresh member (new name, new peer address, empty data
// directory) in place of the removed member i, whose container's spec was old, and
// starts it with --initial-cluster-state=existing as Nodes[i], waiting at
// most 90 s until it answers. A member that does not answer is removed from
// the membership and its container removed; the error says so.
func (c *Cluster) addEtcdMember(ctx context.Context, cli *clientv3.Client, i int, old launch.Spec, token string) (string, error) {
	name := "e" + launch.RandomID(3)
	alias := "etcd-" + name
	peer := "http://" + alias + ":2380"
	initial, err := joinEtcdMember(cli, name, peer)
	if err != nil {
		return "", fmt.Errorf("member add: %w", err)
	}
	port, err := launch.FreePort()
	if err != nil {
		return "", err
	}
	sp := etcdMember(old.Image, old.Entrypoint, port, name, strings.Join(initial, ","), peer, token)
	sp.Cmd = append(sp.Cmd, "--initial-cluster-state", "existing")
	sp.Network, sp.Alias = old.Network, alias
	sctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err = c.startMember(sctx, i, sp)
	if err == nil {
		return name, nil
	}
	if rerr := removeEtcdMemberWhere(ctx, cli, hasPeer(peer), "peer "+peer); rerr != nil {
		return "", fmt.Errorf("etcd member %s did not start: %w; and removing it again: %w", name, err, rerr)
	}
	return "", fmt.Errorf("etcd member %s did not start: %w", name, err)
}

// member returns member i of a cluster of kind on a cluster network, and
// its container, for the operation what.
func (c *Cluster) member(t testing.TB, i int, kind, what string) (*Server, *launch.Container) {
	t.Helper()
	if c.kind != kind {
		t.Fatalf("testenv: %s of a %s cluster", what, c.kind)
	}
	old := c.Nodes[i]
	oc := old.container(t, what)
	if oc.Spec.Network == nil {
		t.Fatalf("testenv: %s of a member without a cluster network", what)
	}
	return old, oc
}

// startMember starts a cluster member of sp as Nodes[i], in place of one
// whose container is gone, and waits until it answers. On a cluster on slow
// disks, the new member gets the old one's disk, emptied (Disks[i]).
func (c *Cluster) startMember(ctx context.Context, i int, sp launch.Spec) error {
	d, err := docker()
	if err != nil {
		return err
	}
	if c.Disks != nil {
		if err := empty(c.Disks[i]); err != nil {
			return fmt.Errorf("empty the disk of %s member %d: %w", c.kind, i+1, err)
		}
		onDisk(&sp, c.Disks[i])
	}
	s, err := startServer(ctx, d, sp, false)
	if err != nil {
		return fmt.Errorf("new %s member: %w", c.kind, err)
	}
	c.Nodes[i] = s
	return nil
}

// ReplaceZooKeeperMember replaces server i of a ZooKeeper ensemble by a
// fresh one under the same id, the procedure of ensembles without dynamic
// reconfiguration (reconfigEnabled is false here): its container removed,
// a new one, with an empty data directory but the same myid, host name
// and server lines, started and waited for until it serves as a follower
// or leader, having synchronised from the leader. Nodes[i] is the new
// server afterwards, at a new client address.
func (c *Cluster) ReplaceZooKeeperMember(t testing.TB, i int) {
	t.Helper()
	start := time.Now()
	old, oc := c.member(t, i, "zookeeper", "ReplaceZooKeeperMember")
	old.remove()
	port, err := launch.FreePort()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	var servers strings.Builder
	for j := range c.Nodes {
		fmt.Fprintf(&servers, "server.%d=zookeeper%d:2888:3888\n", j+1, j+1)
	}
	sp := zkSpec(Images{Server: oc.Spec.Image}, port, i+1, servers.String())
	sp.Network, sp.Alias = oc.Spec.Network, oc.Spec.Alias
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := c.startMember(ctx, i, sp); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Logf("testenv: zookeeper server %d (%s) replaced by a fresh one at %s in %v", i+1, old.Addr(), c.Nodes[i].Addr(), time.Since(start).Round(time.Millisecond))
}

// removeEtcdMember removes, through cli, the member that serves clients at
// addr.
func removeEtcdMember(ctx context.Context, cli *clientv3.Client, addr string) error {
	return removeEtcdMemberWhere(ctx, cli, func(m *etcdserverpb.Member) bool {
		return slices.Contains(m.ClientURLs, "http://"+addr)
	}, "clients at "+addr)
}

// removeEtcdMemberWhere removes, through cli, the member for which is
// reports true; what describes it in the error when there is none.
func removeEtcdMemberWhere(ctx context.Context, cli *clientv3.Client, is func(*etcdserverpb.Member) bool, what string) error {
	list, err := cli.MemberList(ctx)
	if err != nil {
		return fmt.Errorf("member list: %w", err)
	}
	var id uint64
	for _, m := range list.Members {
		if is(m) {
			id = m.ID
		}
	}
	if id == 0 {
		return fmt.Errorf("no member of %s: %v", what, list.Members)
	}
	// etcd refuses (ErrUnhealthy) a removal that would leave fewer
	// members than a quorum that have been connected for its health
	// interval (5 s): just after a start or an earlier replacement, wait.
	// An attempt that timed out may have removed the member all the same:
	// then the next finds it gone (a loaded CI run, 2026-12-02).
	if err := poll(time.Minute, func(ctx context.Context) error {
		_, err := cli.MemberRemove(ctx, id)
		if err != nil && strings.Contains(err.Error(), "member not found") {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("member remove: %w", err)
	}
	return nil
}

// joinEtcdMember adds a member of peer address peer through cli and returns
// the --initial-cluster of the new member, which is to be named name.
func joinEtcdMember(cli *clientv3.Client, name, peer string) ([]string, error) {
	var initial []string
	err := poll(time.Minute, func(ctx context.Context) error {
		// An attempt that timed out may have added the member all the
		// same: then the list has it, and it is not added again (etcd
		// would refuse: a second member not started yet leaves too few
		// started ones for a quorum).
		list, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(list.Members, hasPeer(peer)) {
			added, err := cli.MemberAdd(ctx, []string{peer})
			if err != nil {
				return err
			}
			list.Members = added.Members
		}
		initial = initial[:0]
		for _, m := range list.Members {
			n := m.Name
			if slices.Contains(m.PeerURLs, peer) {
				n = name // not started yet: no name
			}
			for _, u := range m.PeerURLs {
				initial = append(initial, n+"="+u)
			}
		}
		return nil
	})
	return initial, err
}

// hasPeer matches the member of peer address peer.
func hasPeer(peer string) func(*etcdserverpb.Member) bool {
	return func(m *etcdserverpb.Member) bool { return slices.Contains(m.PeerURLs, peer) }
}
