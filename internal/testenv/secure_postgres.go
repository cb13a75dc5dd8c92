package testenv

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distlock/locker/internal/launch"
	"github.com/distlock/locker/internal/testcerts"
)

// A SecurePostgresServer is a private PostgreSQL 15 server configured as
// production would be (launch.SecurePostgres): TLS only, with a server
// certificate of CA for 127.0.0.1 and localhost; SCRAM passwords; client
// certificates too for members of launch.PostgresClientCertRole.
type SecurePostgresServer struct {
	*Server
	CA       *testcerts.CA
	Password string // of the superuser postgres
	// Dir holds ca.pem, the CA's certificate, for sslrootcert.
	Dir string
}

// SecurePostgres starts a SecurePostgresServer for the calling test, with
// a CA and a superuser password made for it.
func SecurePostgres(t testing.TB) *SecurePostgresServer {
	t.Helper()
	ca := testcerts.NewCA(t, "locker postgres test CA")
	pair := ca.Server(t)
	s := &SecurePostgresServer{CA: ca, Password: launch.RandomID(12), Dir: ca.WriteFiles(t, nil)}
	s.Server = Private(t, "postgres", "LOCKER_TEST_POSTGRES_DSN", func(img Images, port int) launch.Spec {
		return launch.SecurePostgres(img.Server, port,
			launch.PostgresSecrets{Cert: pair.CertPEM, Key: pair.KeyPEM, CA: ca.CertPEM, Password: s.Password},
			pgSettings...)
	})
	return s
}

// URL is the libpq URL of database db as user with password (none if
// empty), verifying the server against the CA (sslmode=verify-full);
// params are more query parameters, "name=value".
func (s *SecurePostgresServer) URL(user, password, db string, params ...string) string {
	u := &url.URL{Scheme: "postgres", User: url.User(user), Host: s.Addr(), Path: "/" + db}
	if password != "" {
		u.User = url.UserPassword(user, password)
	}
	q := url.Values{"sslmode": {"verify-full"}, "sslrootcert": {filepath.Join(s.Dir, "ca.pem")}}
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		q.Add(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// AdminURL is URL as the superuser postgres.
func (s *SecurePostgresServer) AdminURL(db string) string { return s.URL("postgres", s.Password, db) }
