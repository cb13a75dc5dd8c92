package postgres_test

import (
	"context"
	"errors"
	"iter"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/distlock/locker"
	"github.com/distlock/locker/conformance"
	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/secretcheck"
	"github.com/distlock/locker/internal/testcerts"
	"github.com/distlock/locker/internal/testenv"
	"github.com/distlock/locker/postgres"
)

// secure is a SecurePostgres server set up as docs/design/security-postgres.md
// says: database app; role owner owns schema locks and ran SchemaSQL in it;
// role app, least privilege, has what GrantSQL grants; role other owns
// schema other (its own lock table) and was granted nothing in locks.
type secure struct {
	srv                     *testenv.SecurePostgresServer
	ownerPW, appPW, otherPW string
}

const secureDB = "app"

// url is the libpq URL of database app as user with password; params as
// in SecurePostgresServer.URL.
func (s *secure) url(user, password string, params ...string) string {
	return s.srv.URL(user, password, secureDB, params...)
}

func (s *secure) admin(t testing.TB) *pgx.Conn { return adminConn(t, s.srv.AdminURL(secureDB)) }

func newSecure(t *testing.T) *secure {
	srv := testenv.SecurePostgres(t)
	s := &secure{srv: srv, ownerPW: "owner-" + launch.RandomID(8), appPW: "app-" + launch.RandomID(8), otherPW: "other-" + launch.RandomID(8)}
	ctx := ctxT(t, time.Minute)
	root := adminConn(t, srv.AdminURL("postgres"))
	execAll(t, root,
		"CREATE DATABASE "+secureDB,
		"REVOKE ALL ON DATABASE "+secureDB+" FROM PUBLIC",
		"CREATE ROLE owner LOGIN PASSWORD '"+s.ownerPW+"'",
		"CREATE ROLE app LOGIN PASSWORD '"+s.appPW+"'",
		"CREATE ROLE other LOGIN PASSWORD '"+s.otherPW+"'",
		"GRANT CONNECT ON DATABASE "+secureDB+" TO owner, app, other",
	)
	db := s.admin(t)
	execAll(t, db,
		"CREATE SCHEMA locks AUTHORIZATION owner",
		"CREATE SCHEMA other AUTHORIZATION other",
	)
	// The migration, as the schema's owner: the documented statements.
	ddl, err := postgres.SchemaSQL("locks", postgres.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	grants, err := postgres.GrantSQL("locks", postgres.DefaultTable, "app")
	if err != nil {
		t.Fatal(err)
	}
	owner := adminConn(t, s.url("owner", s.ownerPW))
	if _, err := owner.Exec(ctx, ddl+grants); err != nil {
		t.Fatalf("schema and grants as owner: %v", err)
	}
	return s
}

// lockerOpts are the options of the least-privilege role app.
var appOpts = []locker.Option{postgres.WithSchema("locks"), postgres.WithSkipSchemaCreation(true)}

func TestSecurity(t *testing.T) {
	s := newSecure(t)

	// The conformance suite as the least-privilege role, over TLS with a
	// SCRAM password, never running DDL.
	for _, mode := range []postgres.Mode{postgres.ForUpdate, postgres.Advisory} {
		t.Run("Conformance/"+mode.String(), func(t *testing.T) {
			h := newHarness(t, s.url("app", s.appPW))
			// Every connection the suite opens costs a TLS handshake and a
			// SCRAM exchange (4096 PBKDF2 rounds, slow under -race): the
			// default 500 ms TTL leaves too little room for them on a
			// loaded machine.
			h.ttl = 2 * time.Second
			// For the same reason, connections are dialled ahead: an
			// advisory-mode waiter takes a connection of its own, and one
			// dialled at Acquire can arrive in the server's queue after a
			// waiter that called Acquire the suite's FIFO gap (250 ms) later.
			h.minConns = 4
			h.opts = append(append([]locker.Option(nil), appOpts...), postgres.WithMode(mode))
			conformance.Run(t, h)
		})
	}
	t.Run("Unauthorized", func(t *testing.T) { testUnauthorized(t, s) })
	t.Run("TLS", func(t *testing.T) { testTLS(t, s) })
	t.Run("ClientCertificate", func(t *testing.T) { testClientCert(t, s) })
	t.Run("NoMigrations", func(t *testing.T) { testNoMigrations(t, s) })
	t.Run("Isolation", func(t *testing.T) { testIsolation(t, s) })
	t.Run("NotEnforceable", func(t *testing.T) { testNotEnforceable(t, s) })
	t.Run("Secrets", func(t *testing.T) { testSecrets(t, s) })
	t.Run("PGPASSWORD", func(t *testing.T) { testPGPassword(t, s) })
}

// wantUnauthorized fails t unless err is locker.ErrUnauthorized (and no
// other class) carrying the server's message text.
func wantUnauthorized(t *testing.T, what string, err error, text string) {
	t.Helper()
	switch {
	case !errors.Is(err, locker.ErrUnauthorized):
		t.Errorf("%s = %v, want ErrUnauthorized", what, err)
	case errors.Is(err, locker.ErrUnavailable), errors.Is(err, locker.ErrLocked):
		t.Errorf("%s = %v: ErrUnauthorized and ErrUnavailable/ErrLocked at once", what, err)
	case !strings.Contains(err.Error(), text):
		t.Errorf("%s = %v, want the server's message %q in it", what, err, text)
	}
}

func modes() map[string][]locker.Option {
	return map[string][]locker.Option{
		"for_update": nil,
		"advisory":   {postgres.WithMode(postgres.Advisory)},
	}
}

// testUnauthorized: refused credentials at Open (SQLSTATE 28P01, 28000)
// and refused privileges (42501) at Open and in each operation, in both
// modes, are ErrUnauthorized with the server's message.
func testUnauthorized(t *testing.T, s *secure) {
	ctx := ctxT(t, time.Minute)
	for name := range modes() {
		mode := "mode=" + name
		_, err := locker.Open(ctx, s.url("app", "wrong-"+s.appPW, "schema=locks", mode))
		wantUnauthorized(t, name+": Open with a wrong password", err, "password authentication failed")
		_, err = locker.Open(ctx, s.url("nobody", "x", "schema=locks", mode))
		wantUnauthorized(t, name+": Open as an unknown role", err, "(SQLSTATE 28P01)")
		// TLS is off: the server has no pg_hba.conf line for it.
		_, err = locker.Open(ctx, s.url("app", s.appPW, "schema=locks", mode, "sslmode=disable"))
		wantUnauthorized(t, name+": Open without TLS", err, "no pg_hba.conf entry")
		// other may connect but not use schema locks: the check of
		// skip_schema_creation says so at Open…
		_, err = locker.Open(ctx, s.url("other", s.otherPW, "schema=locks", "skip_schema_creation=true", mode))
		wantUnauthorized(t, name+": Open of another role's schema", err, "lacks USAGE ON SCHEMA locks")

		// …and without it, every operation meets the server's refusal.
		l, err := locker.Open(ctx, s.url("other", s.otherPW, "schema=locks", mode))
		if err != nil {
			t.Fatalf("%s: Open as other: %v", name, err)
		}
		t.Cleanup(func() { _ = l.Close() })
		_, err = l.TryAcquire(ctx, "k")
		wantUnauthorized(t, name+": TryAcquire", err, "permission denied for schema locks")
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = l.Acquire(actx, "k")
		cancel()
		wantUnauthorized(t, name+": Acquire", err, "permission denied for schema locks")
		if name == "for_update" {
			_, err = locker.Inspect(ctx, l, "k")
			wantUnauthorized(t, name+": Inspect", err, "permission denied for schema locks")
			wantUnauthorized(t, name+": List", firstErr(locker.List(ctx, l, "")), "permission denied for schema locks")
			wantUnauthorized(t, name+": Watch", firstErr(locker.Watch(ctx, l, "k")), "permission denied for schema locks")
		}
	}

	// A privilege revoked under a held lock: Publish (which writes the
	// holder record) is refused.
	admin := adminConn(t, s.url("owner", s.ownerPW))
	l := newLocker(t, s.url("app", s.appPW), appOpts...)
	lease, err := l.TryAcquire(ctx, randomKey("revoked"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "REVOKE UPDATE ON locks.locker_locks FROM app"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "GRANT UPDATE ON locks.locker_locks TO app") })
	err = locker.Publish(ctx, lease, "v")
	wantUnauthorized(t, "Publish without UPDATE", err, "permission denied for table locker_locks")
	if _, err := admin.Exec(ctx, "GRANT UPDATE ON locks.locker_locks TO app"); err != nil {
		t.Fatal(err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// firstErr is the error of the first item of seq that has one.
func firstErr(seq iter.Seq2[locker.LockInfo, error]) error {
	for _, err := range seq {
		if err != nil {
			return err
		}
	}
	return nil
}

// testTLS: sslmode=verify-full against the test CA works by IP and by
// name; a client that trusts another CA is refused before any password is
// sent.
func testTLS(t *testing.T, s *secure) {
	ctx := ctxT(t, time.Minute)
	for name, opts := range modes() {
		lockOnce(t, name+": verify-full", s.url("app", s.appPW, "schema=locks", "skip_schema_creation=true"), opts...)
	}
	// The certificate names localhost too.
	lockOnce(t, "verify-full by name", strings.Replace(s.url("app", s.appPW, "schema=locks"), "127.0.0.1", "localhost", 1))
	// A client that trusts another CA.
	dir := testcerts.NewCA(t, "another CA").WriteFiles(t, nil)
	u := s.url("app", s.appPW, "schema=locks")
	u = strings.Replace(u, pathParam(s.srv.Dir), pathParam(dir), 1)
	_, err := locker.Open(ctx, u)
	switch {
	case err == nil:
		t.Fatal("Open trusting another CA succeeded")
	case !strings.Contains(err.Error(), "certificate"):
		t.Errorf("Open trusting another CA = %v, want a certificate error", err)
	case errors.Is(err, locker.ErrUnauthorized), !errors.Is(err, locker.ErrUnavailable):
		// The server refused nothing: the client refused the server.
		t.Errorf("Open trusting another CA = %v, want ErrUnavailable: not the server's refusal", err)
	}
}

// pathParam is dir's ca.pem as it appears in a URL's query.
func pathParam(dir string) string {
	return strings.ReplaceAll(filepath.Join(dir, "ca.pem"), "/", "%2F")
}

// testClientCert: a member of launch.PostgresClientCertRole needs its
// password and a client certificate of the CA naming it (pg_hba.conf
// clientcert=verify-full), given with libpq's sslcert and sslkey.
func testClientCert(t *testing.T, s *secure) {
	ctx := ctxT(t, time.Minute)
	pw := "cert-" + launch.RandomID(8)
	admin := s.admin(t)
	execAll(t, admin,
		"CREATE ROLE "+launch.PostgresClientCertRole+" NOLOGIN",
		"CREATE ROLE certapp LOGIN PASSWORD '"+pw+"' IN ROLE "+launch.PostgresClientCertRole,
		"GRANT CONNECT ON DATABASE "+secureDB+" TO certapp",
		"GRANT app TO certapp", // app's privileges, in schema locks
	)
	dir := s.srv.CA.WriteFiles(t, map[string]testcerts.Pair{
		"certapp":  s.srv.CA.Client(t, "certapp"),
		"intruder": s.srv.CA.Client(t, "intruder"),
	})
	certURL := func(name string) string {
		return s.url("certapp", pw, "schema=locks", "skip_schema_creation=true",
			"sslcert="+filepath.Join(dir, name+".pem"), "sslkey="+filepath.Join(dir, name+"-key.pem"))
	}
	_, err := locker.Open(ctx, s.url("certapp", pw, "schema=locks"))
	wantUnauthorized(t, "Open without a client certificate", err, "certificate")
	_, err = locker.Open(ctx, certURL("intruder"))
	// The server tells the client no more than that (the log says the
	// certificate's name does not match).
	wantUnauthorized(t, "Open with another role's certificate", err, "password authentication failed")
	lockOnce(t, "Open with password and client certificate", certURL("certapp"))
}

// lockOnce opens a Locker on url, takes and releases a lock, and closes
// it, failing t naming what if any step fails.
func lockOnce(t *testing.T, what, url string, opts ...locker.Option) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	l, err := locker.Open(ctx, url, opts...)
	if err != nil {
		t.Fatalf("%s: Open: %v", what, err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, randomKey("once"))
	if err != nil {
		t.Fatalf("%s: TryAcquire: %v", what, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatalf("%s: Release: %v", what, err)
	}
}

// testNoMigrations: with skip_schema_creation the backend runs no DDL and
// says at Open what is missing (ErrInvalidOption) or which privileges the
// role lacks (ErrUnauthorized); without it, a role that may not create
// gets ErrUnauthorized at its first operation.
func testNoMigrations(t *testing.T, s *secure) {
	ctx := ctxT(t, time.Minute)
	owner := adminConn(t, s.url("owner", s.ownerPW))
	// A table of an older release (no holder-record columns) and one on
	// which app was granted nothing.
	execAll(t, owner,
		"CREATE TABLE locks.old (key bytea PRIMARY KEY)",
		"CREATE SEQUENCE locks.old_token",
		"GRANT SELECT, INSERT, UPDATE ON locks.old TO app",
		"GRANT USAGE, SELECT, UPDATE ON locks.old_token TO app",
	)
	bare, err := postgres.SchemaSQL("locks", "bare")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.Exec(ctx, bare); err != nil {
		t.Fatal(err)
	}
	for name := range modes() {
		mode := "mode=" + name
		// As the owner, who could create it: nothing is created.
		_, err := locker.Open(ctx, s.url("owner", s.ownerPW, "schema=locks", "table=missing", "skip_schema_creation=true", mode))
		if !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), "missing (table), missing_token (sequence)") {
			t.Errorf("%s: Open of a missing table = %v, want ErrInvalidOption naming the table and sequence", name, err)
		}
		_, err = locker.Open(ctx, s.url("app", s.appPW, "schema=locks", "table=old", "skip_schema_creation=true", mode))
		if !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), "column owner of old") {
			t.Errorf("%s: Open of an old table = %v, want ErrInvalidOption naming its missing columns", name, err)
		}
		_, err = locker.Open(ctx, s.url("app", s.appPW, "schema=locks", "table=bare", "skip_schema_creation=true", mode))
		wantUnauthorized(t, name+": Open of a table without grants", err,
			`role "app" lacks SELECT ON bare, INSERT ON bare, UPDATE ON bare, SELECT ON bare_token, UPDATE ON bare_token`)
		_, err = locker.Open(ctx, s.url("app", s.appPW, "schema=other", "skip_schema_creation=true", mode))
		if !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), "locker_locks (table)") {
			t.Errorf("%s: Open of schema other = %v, want ErrInvalidOption naming the missing table", name, err)
		}
		// Without skip_schema_creation, app may not create the table.
		l, err := locker.Open(ctx, s.url("app", s.appPW, "schema=locks", "table=missing", mode))
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.TryAcquire(ctx, "k")
		wantUnauthorized(t, name+": TryAcquire creating a table", err, "permission denied for schema locks")
		_ = l.Close()
		// New checks at the first operation.
		l = newLocker(t, s.url("app", s.appPW), postgres.WithSchema("locks"), postgres.WithTable("missing"), postgres.WithSkipSchemaCreation(true))
		if _, err := l.TryAcquire(ctx, "k"); !errors.Is(err, locker.ErrInvalidOption) || !strings.Contains(err.Error(), "missing (table)") {
			t.Errorf("%s: TryAcquire of New on a missing table = %v, want ErrInvalidOption naming it", name, err)
		}
	}
	var n int
	if err := owner.QueryRow(ctx, "SELECT count(*) FROM pg_class WHERE relname LIKE 'missing%'").Scan(&n); err != nil || n != 0 {
		t.Errorf("relations named missing… = %d, %v; want none created", n, err)
	}

	// The guard, as the least-privilege role, on a table the owner made.
	ownerPool := newPool(t, s.url("owner", s.ownerPW))
	og, err := postgres.NewGuard(ownerPool, postgres.WithGuardSchema("locks"))
	if err != nil {
		t.Fatal(err)
	}
	if err := og.Admit(ctx, "setup", 1); err != nil {
		t.Fatalf("guard table as owner: %v", err)
	}
	g, err := postgres.NewGuard(newPool(t, s.url("app", s.appPW)), postgres.WithGuardSchema("locks"), postgres.WithGuardSkipSchemaCreation(true))
	if err != nil {
		t.Fatal(err)
	}
	err = g.Admit(ctx, "r", 1)
	wantUnauthorized(t, "guard without grants", err, "permission denied for table locker_fences")
	if _, err := owner.Exec(ctx, "GRANT SELECT, INSERT, UPDATE ON locks.locker_fences TO app"); err != nil {
		t.Fatal(err)
	}
	if err := g.Admit(ctx, "r", 2); err != nil {
		t.Errorf("guard with the documented grant: %v", err)
	}
}

// testIsolation: role other, on the same server and database, has its own
// locks under the same keys, and cannot see, take, block or end app's
// locks in schema locks.
func testIsolation(t *testing.T, s *secure) {
	ctx := ctxT(t, time.Minute)
	for name, opts := range modes() {
		key := randomKey("isolated")
		app := newLocker(t, s.url("app", s.appPW), append(append([]locker.Option(nil), appOpts...), opts...)...)
		lease, err := app.TryAcquire(ctx, key, locker.WithOwner("app-holder"))
		if err != nil {
			t.Fatal(err)
		}
		// other's own locks, in its own schema (created by other, its
		// owner, on first use), under the same key.
		own := newLocker(t, s.url("other", s.otherPW), append([]locker.Option{postgres.WithSchema("other")}, opts...)...)
		ol, err := own.TryAcquire(ctx, key)
		if err != nil {
			t.Fatalf("%s: other's lock on the same key in its own schema: %v", name, err)
		}
		_ = ol.Release(ctx)
		// other aimed at app's schema: refused, never ErrLocked.
		intruder := newLocker(t, s.url("other", s.otherPW), append([]locker.Option{postgres.WithSchema("locks")}, opts...)...)
		_, err = intruder.TryAcquire(ctx, key)
		wantUnauthorized(t, name+": other's TryAcquire of app's key", err, "permission denied")
		if name == "for_update" {
			_, err = locker.Inspect(ctx, intruder, key)
			wantUnauthorized(t, name+": other's Inspect of app's key", err, "permission denied")
			wantUnauthorized(t, name+": other's List", firstErr(locker.List(ctx, intruder, "")), "permission denied")
		}
		// Nor in SQL: read, lock, delete the rows, or end app's sessions.
		oc := adminConn(t, s.url("other", s.otherPW))
		for _, q := range []string{
			"SELECT count(*) FROM locks.locker_locks",
			"SELECT 1 FROM locks.locker_locks FOR UPDATE",
			"DELETE FROM locks.locker_locks",
			"SELECT nextval('locks.locker_locks_token')",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'app'",
			"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE usename = 'app'",
		} {
			_, err := oc.Exec(ctx, q)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
				t.Errorf("other: %s = %v, want SQLSTATE 42501", q, err)
			}
		}
		if err := lease.Err(); err != nil {
			t.Fatalf("%s: app's lease after other's attempts: %v", name, err)
		}
		if err := lease.Refresh(ctx); err != nil {
			t.Fatalf("%s: app's refresh after other's attempts: %v", name, err)
		}
		if err := lease.Release(ctx); err != nil {
			t.Fatalf("%s: app's release after other's attempts: %v", name, err)
		}
	}
}

// testNotEnforceable is what PostgreSQL cannot enforce, as the design
// document says: advisory locks are per database and need no grant, so a
// role that may connect can take the number of one of app's locks (and
// block it); pg_locks shows every role's locks, and pg_stat_activity every
// session's application_name, which carries a holder's label.
func testNotEnforceable(t *testing.T, s *secure) {
	ctx := ctxT(t, time.Minute)
	key := randomKey("blocked")
	num := postgres.AdvisoryKey("locks", postgres.DefaultTable, key)
	app := newLocker(t, s.url("app", s.appPW), append(append([]locker.Option(nil), appOpts...), postgres.WithMode(postgres.Advisory))...)
	oc := adminConn(t, s.url("other", s.otherPW))
	if _, err := oc.Exec(ctx, "SELECT pg_advisory_lock($1)", num); err != nil {
		t.Fatalf("other's pg_advisory_lock: %v", err)
	}
	if _, err := app.TryAcquire(ctx, key); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("app's TryAcquire of a key whose number other holds = %v, want ErrLocked (not enforceable)", err)
	}
	if _, err := oc.Exec(ctx, "SELECT pg_advisory_unlock($1)", num); err != nil {
		t.Fatal(err)
	}
	lease, err := app.TryAcquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)
	var seen int
	if err := oc.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "+
		"AND ((classid::bigint << 32) | objid::bigint) = $1", num).Scan(&seen); err != nil || seen != 1 {
		t.Errorf("other's view of app's advisory lock in pg_locks = %d, %v; want 1 (visible to every role)", seen, err)
	}

	fu := newLocker(t, s.url("app", s.appPW), appOpts...)
	held, err := fu.TryAcquire(ctx, randomKey("visible"), locker.WithOwner("app-label"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)
	var names []string
	if err := oc.QueryRow(ctx, "SELECT array_agg(application_name) FROM pg_stat_activity WHERE usename = 'app'").Scan(&names); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(names, "|"), "app-label") {
		t.Errorf("app's application_names seen by other = %q, want the holder's label (visible to every role)", names)
	}
}

// testSecrets: no password, right or wrong, reaches an error, a log
// record, a span or a metric, through a refused Open, a grant, a release
// and a lost lease, in both modes.
func testSecrets(t *testing.T, s *secure) {
	ctx := ctxT(t, time.Minute)
	for name, opts := range modes() {
		r := secretcheck.New()
		wrong := "wrong-" + launch.RandomID(8)
		all := append(append([]locker.Option(nil), r.Options()...), opts...)
		_, errOpen := locker.Open(ctx, s.url("app", wrong, "schema=locks", "skip_schema_creation=true"), all...)
		if errOpen == nil {
			t.Fatal("Open with a wrong password succeeded")
		}
		l, err := locker.Open(ctx, s.url("app", s.appPW, "schema=locks", "skip_schema_creation=true"), all...)
		if err != nil {
			t.Fatal(err)
		}
		lease, err := l.TryAcquire(ctx, randomKey("secret"))
		if err != nil {
			t.Fatal(err)
		}
		errRelease := lease.Release(ctx)
		lost, err := l.TryAcquire(ctx, randomKey("secret"))
		if err != nil {
			t.Fatal(err)
		}
		killRole(t, s, "app")
		select {
		case <-lost.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the lease outlived its session by 30 s", name)
		}
		errLost := lost.Err()
		errLostRelease := lost.Release(ctx)
		_ = l.Close()
		r.Check(t, []string{s.appPW, wrong}, errOpen, errRelease, errLost, errLostRelease)
	}
}

// killRole ends every session of role.
func killRole(t *testing.T, s *secure, role string) {
	t.Helper()
	if _, err := s.admin(t).Exec(ctxT(t, 10*time.Second),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
		t.Fatal(err)
	}
}

// testPGPassword: with no password in the URL, pgx reads PGPASSWORD.
func testPGPassword(t *testing.T, s *secure) {
	t.Setenv("PGPASSWORD", s.appPW)
	lockOnce(t, "PGPASSWORD", s.url("app", "", "schema=locks", "skip_schema_creation=true"))
}

// execAll runs each statement on conn, failing t at the first refused.
func execAll(t *testing.T, conn *pgx.Conn, statements ...string) {
	t.Helper()
	for _, q := range statements {
		if _, err := conn.Exec(ctxT(t, 30*time.Second), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
