package main

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testenv"
)

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
