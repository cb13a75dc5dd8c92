package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A MemberAdd whose reply is lost or late (each attempt of joinEtcdMember
// has a second; a loaded machine's quorum write can take longer) may have
// added the member: the next attempt must find it, not add it again. etcd
// refuses a second add while the first new member has not started ("not
// enough started members"), and a CI run's replace_the_leader failed so.
func TestJoinEtcdMember_AgainAfterAnAddThatApplied_FindsIt(t *testing.T) {
	c := EtcdCluster(t)
	_, _, cli := removeAFollower(t, c)
	const name, peer = "enew", "http://etcd-enew:2380"
	// The add whose reply the caller never saw.
	if _, err := joinEtcdMember(cli, name, peer); err != nil {
		t.Fatal(err)
	}
	initial, err := joinEtcdMember(cli, name, peer)
	if err != nil {
		t.Fatalf("adding the member again: %v", err)
	}
	if !slices.Contains(initial, name+"="+peer) || len(initial) != 3 {
		t.Errorf("initial cluster %v, want the two members and %s=%s", initial, name, peer)
	}
}

// A new member that does not start must not stay in the membership: added
// but never started, it leaves too few started members for etcd to allow
// any later removal ("unhealthy cluster"), and every later replacement
// fails — a soak's did, three runs in a row, after one new member could not
// catch up. addEtcdMember removes it again, and the next member joins.
func TestAddEtcdMember_MemberThatDoesNotStart_RemovedAgain(t *testing.T) {
	c := EtcdCluster(t)
	i, oc, cli := removeAFollower(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	token := oc.Spec.Cmd[slices.Index(oc.Spec.Cmd, "--initial-cluster-token")+1]

	// The new member's flags are its own (launch.Etcd): a broken entrypoint
	// is what keeps it from starting.
	broken := oc.Spec
	broken.Entrypoint = []string{"/no-such-etcd"}
	if name, err := c.addEtcdMember(ctx, cli, i, broken, token); err == nil {
		t.Fatalf("a member that cannot start (%s) joined", name)
	}
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 2 {
		t.Fatalf("after a new member failed to start, the membership is %v, want the two members left", list.Members)
	}
	if _, err := c.addEtcdMember(ctx, cli, i, oc.Spec, token); err != nil {
		t.Fatalf("the next member: %v", err)
	}
}

// removeAFollower removes a follower of c from its membership, and its
// container: a follower, so that no election slows what follows (a quiet CI
// run removed the leader, and its add timed out). It returns the member's
// index, its container and a client of the others, closed when t ends.
func removeAFollower(t *testing.T, c *Cluster) (int, *launch.Container, *clientv3.Client) {
	t.Helper()
	leader := c.Leader(t)
	i := slices.IndexFunc(c.Nodes, func(n *Server) bool { return n != leader })
	gone, oc := c.member(t, i, "etcd", "removeAFollower")
	var others []string
	for j, n := range c.Nodes {
		if j != i {
			others = append(others, n.Addr())
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: others, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := removeEtcdMember(ctx, cli, gone.Addr()); err != nil {
		t.Fatal(err)
	}
	gone.remove()
	return i, oc, cli
}
