package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// authEtcd starts a private etcd with authentication enabled and user
// root, password password; it returns its URL, without credentials.
func authEtcd(t *testing.T, password string) string {
	t.Helper()
	s := testenv.Private(t, "etcd", "LOCKER_TEST_ETCD_ENDPOINTS", func(img testenv.Images, port int) launch.Spec {
		return launch.EtcdSingle(img.Etcd, nil, port)
	})
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Addr()}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.UserAdd(ctx, "root", password); err != nil {
		t.Fatalf("etcd user add root: %v", err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatalf("etcd user grant-role root root: %v", err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatalf("etcd auth enable: %v", err)
	}
	return "etcd://" + s.Addr() + "/lockctl"
}

// lockctl takes etcd's credentials from ETCDCTL_USER ("user:password", or
// the user with ETCDCTL_PASSWORD), as etcdctl does, when the URL gives no
// password; the user name of ETCDCTL_USER goes with --password-file too. No
// output shows the password.
func TestLockctl_ETCDCTLVariables(t *testing.T) {
	needShell(t)
	pw := newSecret(t)
	url := authEtcd(t, pw)
	file := passwordFile(t, pw+"\n")
	wrong := newSecret(t)
	for _, c := range []struct {
		name, user, password string
		flags                []string
		ok                   bool
	}{
		{"ETCDCTL_USER user:password", "root:" + pw, "", nil, true},
		{"ETCDCTL_USER and ETCDCTL_PASSWORD", "root", pw, nil, true},
		{"ETCDCTL_USER and --password-file", "root", "", []string{"--password-file", file}, true},
		{"--password-file beats ETCDCTL_PASSWORD", "root", wrong, []string{"--password-file", file}, true},
		{"no credentials", "", "", nil, false},
		{"wrong password", "root:" + wrong, "", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("ETCDCTL_USER", c.user)
			t.Setenv("ETCDCTL_PASSWORD", c.password)
			args := append(append([]string{"run"}, c.flags...), url, "k", "--", "sh", "-c", "env | grep ^LOCKER_")
			code, stdout, stderr := lockctlRun(t, 30*time.Second, args...)
			if (code == exitOK) != c.ok {
				t.Errorf("lockctl %s: status %d, want success %v; stderr: %s", redactArgs(args), code, c.ok, stderr)
			}
			noSecret(t, "lockctl "+strings.Join(args, " "), pw, stdout, stderr)
			noSecret(t, "lockctl "+strings.Join(args, " "), wrong, stdout, stderr)
			t.Logf("status %d: %s", code, strings.TrimSpace(stderr))
		})
	}
}
