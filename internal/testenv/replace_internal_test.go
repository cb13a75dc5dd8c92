package testenv

import (
	"context"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// A MemberAdd whose reply is lost or late (each attempt of addEtcdMember
// has a second; a loaded machine's quorum write can take longer) may have
// added the member: the next attempt must find it, not add it again. etcd
// refuses a second add while the first new member has not started ("not
// enough started members"), and a CI run's replace_the_leader failed so.
func TestAddEtcdMember_AgainAfterAnAddThatApplied_FindsIt(t *testing.T) {
	c := EtcdCluster(t)
	// A follower goes, so that no election slows the adds (a quiet CI run
	// removed the leader, and its add timed out).
	leader := c.Leader(t)
	var gone *Server
	var others []string
	for _, n := range c.Nodes {
		if gone == nil && n != leader {
			gone = n
		} else {
			others = append(others, n.Addr())
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: others, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := removeEtcdMember(ctx, cli, gone.Addr()); err != nil {
		t.Fatal(err)
	}
	const name, peer = "enew", "http://etcd-enew:2380"
	// The add whose reply the caller never saw.
	if _, err := addEtcdMember(cli, name, peer); err != nil {
		t.Fatal(err)
	}
	initial, err := addEtcdMember(cli, name, peer)
	if err != nil {
		t.Fatalf("adding the member again: %v", err)
	}
	if !slices.Contains(initial, name+"="+peer) || len(initial) != 3 {
		t.Errorf("initial cluster %v, want the two members and %s=%s", initial, name, peer)
	}
}
