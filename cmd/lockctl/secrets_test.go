package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// secureRedis starts a private Redis that requires password, and returns
// its address.
func secureRedis(t *testing.T, password string) string {
	t.Helper()
	s := testenv.Private(t, "redis", "LOCKER_TEST_REDIS_ADDR", func(img testenv.Images, port int) launch.Spec {
		sp := launch.Redis(img.Server, port, "--requirepass", password)
		sp.Services[0].Probe = launch.RedisRequirePass
		return sp
	})
	return s.Addr()
}

// newSecret is a password no output could contain by chance.
func newSecret(t *testing.T) string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return "pw-" + hex.EncodeToString(b[:])
}

// noSecret fails t if any of outputs shows secret, in clear or
// percent-encoded.
func noSecret(t *testing.T, what, secret string, outputs ...string) {
	t.Helper()
	for _, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s: the password shows in %q", what, out)
		}
	}
}

// lockctlRun runs lockctl in-process with args, a context ending after
// limit (which ends elect --observe and list --watch), and returns its status
// and what it wrote to stdout and stderr.
func lockctlRun(t *testing.T, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	a, stdout, stderr := testApp()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	code := a.main(ctx, args)
	return code, stdout.String(), stderr.String()
}

// Against a Redis that requires a password, every subcommand that opens a
// backend works with the password from a file, from REDISCLI_AUTH, or from
// the URL, and none of its output streams — messages, tables, JSON, the
// command's environment, bench's report files — shows the password; a
// wrong password fails (77 once the backend reports ErrUnauthorized),
// without showing either password.
func TestLockctl_PasswordProtectedRedis_NoSecretInOutput(t *testing.T) {
	needShell(t)
	pw := newSecret(t)
	addr := secureRedis(t, pw)
	plain := "redis://" + addr + "/0"
	file := passwordFile(t, pw+"\n")
	wrong := newSecret(t)
	wrongFile := passwordFile(t, wrong+"\n")
	report := t.TempDir()

	// The command prints its environment, less the variable this test
	// gave lockctl itself: lockctl must add no secret to it.
	env := []string{"sh", "-c", `env | grep -v '^REDISCLI_AUTH='`}
	sources := []struct {
		name  string
		url   string
		flags []string
		env   string // REDISCLI_AUTH
	}{
		{"file", plain, []string{"--password-file", file}, ""},
		{"REDISCLI_AUTH", plain, nil, pw},
		{"URL", "redis://:" + pw + "@" + addr + "/0", nil, ""},
	}
	for _, src := range sources {
		t.Run(src.name, func(t *testing.T) {
			t.Setenv("REDISCLI_AUTH", src.env)
			key := "secrets/" + src.name
			with := func(sub string, rest ...string) []string {
				return append(append([]string{sub}, src.flags...), rest...)
			}
			for _, c := range []struct {
				args []string
				want int
			}{
				{with("run", append([]string{src.url, key, "--"}, env...)...), exitOK},
				{with("run", "--try", src.url, key, "--", "sh", "-c", "exit 7"), 7},
				{with("elect", append([]string{src.url, key + "/election", "--"}, env...)...), exitOK},
				{with("elect", "--observe", "--json", src.url, key+"/election"), exitOK},
				{with("inspect", "--json", src.url, key), exitFree},
				{with("inspect", src.url, key), exitFree},
				{with("list", "--json", src.url, "secrets/"), exitOK},
				{with("bench", "--quick", "--workloads", "uncontended", "--out", report, "--backend", src.url), exitOK},
			} {
				limit := 10 * time.Second
				if c.args[1] == "--observe" || len(src.flags) > 0 && c.args[3] == "--observe" {
					limit = 3 * time.Second // observes until interrupted
				}
				code, stdout, stderr := lockctlRun(t, limit, c.args...)
				if code != c.want {
					t.Errorf("lockctl %s: status %d, want %d; stderr: %s", redactArgs(c.args), code, c.want, stderr)
				}
				if c.args[0] == "run" && c.want == exitOK && !strings.Contains(stdout, "LOCKER_TOKEN=") {
					t.Errorf("lockctl %s: the command's environment was not printed: %q", redactArgs(c.args), stdout)
				}
				noSecret(t, "lockctl "+redactArgs(c.args), pw, stdout, stderr)
			}
			for _, f := range []string{"report.md", "results.json"} {
				b, err := os.ReadFile(filepath.Join(report, f))
				if err != nil {
					t.Fatalf("bench report: %v", err)
				}
				noSecret(t, "bench "+f, pw, string(b))
			}
		})
	}

	// Refused: a wrong password, from each source.
	want := "a non-zero status"
	l, err := locker.Open(context.Background(), "redis://:"+wrong+"@"+addr+"/0")
	if err == nil {
		l.Close()
		t.Fatal("Open with a wrong password succeeded")
	}
	unauthorized := errors.Is(err, locker.ErrUnauthorized)
	if unauthorized {
		want = fmt.Sprint(exitNoPerm)
	}
	t.Setenv("REDISCLI_AUTH", "")
	for _, args := range [][]string{
		{"run", "--password-file", wrongFile, plain, "k", "--", "true"},
		{"run", "redis://:" + wrong + "@" + addr + "/0", "k", "--", "true"},
		{"elect", "--password-file", wrongFile, plain, "k", "--", "true"},
		{"inspect", "--password-file", wrongFile, plain, "k"},
		{"list", "--password-file", wrongFile, plain},
		{"bench", "--quick", "--password-file", wrongFile, "--backend", plain},
		{"run", plain, "k", "--", "true"}, // no password at all
	} {
		code, stdout, stderr := lockctlRun(t, 10*time.Second, args...)
		if code == exitOK || (unauthorized && code != exitNoPerm) {
			t.Errorf("lockctl %s: status %d, want %s; stderr: %s", redactArgs(args), code, want, stderr)
		}
		noSecret(t, "lockctl "+redactArgs(args), wrong, stdout, stderr)
		noSecret(t, "lockctl "+redactArgs(args), pw, stdout, stderr)
		t.Logf("lockctl %s: status %d: %s", redactArgs(args), code, strings.TrimSpace(stderr))
	}
	t.Setenv("REDISCLI_AUTH", wrong)
	code, stdout, stderr := lockctlRun(t, 10*time.Second, "run", plain, "k", "--", "true")
	if code == exitOK {
		t.Errorf("lockctl run with a wrong REDISCLI_AUTH: status 0")
	}
	noSecret(t, "lockctl run, wrong REDISCLI_AUTH", wrong, stdout, stderr)

	// Usage errors name the problem, not the password.
	for _, args := range [][]string{
		{"run", "--password-file", file, "memory://", "k", "--", "true"},
		{"run", "--password-file", file, "redis://:" + pw + "@" + addr + "/0", "k", "--", "true"},
		{"bench", "--password-file", file, "--backend", "memory://"},
		{"inspect", "--password-file", file, "redis://:" + pw + "@" + addr + "/0", "k"},
	} {
		code, stdout, stderr := lockctlRun(t, 10*time.Second, args...)
		if code != exitUsage {
			t.Errorf("lockctl %s: status %d, want %d; stderr: %s", redactArgs(args), code, exitUsage, stderr)
		}
		noSecret(t, "lockctl "+redactArgs(args), pw, stdout, stderr)
	}
}

// passwordPostgres starts a private PostgreSQL where role app, owner of
// database app, must give password (SCRAM) from outside the container, and
// returns the URL of that database, without the password.
func passwordPostgres(t *testing.T, password string) string {
	t.Helper()
	s := testenv.Private(t, "postgres", "LOCKER_TEST_POSTGRES_DSN", func(img testenv.Images, port int) launch.Spec {
		return launch.Postgres(img.Server, port)
	})
	_, port, _ := net.SplitHostPort(s.Addr())
	psql := func(sql string) {
		s.Exec(t, "setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups",
			"psql", "-v", "ON_ERROR_STOP=1", "-h", "/tmp", "-p", port, "-U", "postgres", "-c", sql)
	}
	psql(fmt.Sprintf("CREATE ROLE app LOGIN PASSWORD '%s'", password))
	psql("CREATE DATABASE app OWNER app")
	// pg_hba.conf is read top-down: this line comes before the trust
	// that the tests' servers end with.
	s.Exec(t, "sed", "-i", "1i host all app 0.0.0.0/0 scram-sha-256", "/var/lib/locker/pg/pg_hba.conf")
	psql("SELECT pg_reload_conf()")
	return "postgres://app@" + s.Addr() + "/app?sslmode=disable"
}

// lockctl leaves PostgreSQL's password to pgx, which reads PGPASSWORD (as
// libpq does) when neither the URL nor --password-file gives one; the
// file, given, wins over it. No output shows the password.
func TestLockctl_PGPASSWORD(t *testing.T) {
	needShell(t)
	pw := newSecret(t)
	dsn := passwordPostgres(t, pw)
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none")) // no ~/.pgpass
	file := passwordFile(t, pw+"\n")
	wrong := newSecret(t)
	for _, c := range []struct {
		name, pgpassword string
		args             []string
		ok               bool
	}{
		{"PGPASSWORD", pw, []string{"run", dsn, "k", "--", "true"}, true},
		{"PGPASSWORD, inspect", pw, []string{"inspect", "--json", dsn, "k"}, true},
		{"no password", "", []string{"run", dsn, "k", "--", "true"}, false},
		{"wrong PGPASSWORD", wrong, []string{"run", dsn, "k", "--", "true"}, false},
		{"file beats PGPASSWORD", wrong, []string{"run", "--password-file", file, dsn, "k", "--", "true"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("PGPASSWORD", c.pgpassword)
			code, stdout, stderr := lockctlRun(t, 30*time.Second, c.args...)
			if ok := code == exitOK || code == exitFree; ok != c.ok {
				t.Errorf("lockctl %s: status %d, want success %v; stderr: %s", redactArgs(c.args), code, c.ok, stderr)
			}
			noSecret(t, "lockctl "+strings.Join(c.args, " "), pw, stdout, stderr)
			noSecret(t, "lockctl "+strings.Join(c.args, " "), wrong, stdout, stderr)
			t.Logf("status %d: %s", code, strings.TrimSpace(stderr))
		})
	}
}

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
