package launch

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// PostgresSecrets are what SecurePostgres copies into its container: the
// server's certificate and key (PEM), the CA that signs client
// certificates, and the password of the superuser postgres.
type PostgresSecrets struct {
	Cert, Key, CA []byte
	Password      string
}

// PostgresClientCertRole is the group role of SecurePostgres whose members
// must present, besides their password, a client certificate signed by the
// CA whose common name is their role name (clientcert=verify-full).
const PostgresClientCertRole = "clientcert"

// securePgDir holds the certificates, key, password file and pg_hba.conf.
const securePgDir = "/var/lib/locker/tls"

// securePgHBA accepts TLS connections only, each with a SCRAM password;
// members of PostgresClientCertRole also need a client certificate. A
// connection without TLS matches no line ("no pg_hba.conf entry").
// Local connections (docker exec) are peer-authenticated.
const securePgHBA = `local all postgres peer
hostssl all +` + PostgresClientCertRole + ` 0.0.0.0/0 scram-sha-256 clientcert=verify-full
hostssl all all 0.0.0.0/0 scram-sha-256
`

// securePgScript is pgScript with SCRAM instead of trust, its own
// pg_hba.conf and TLS on. The server refuses a key file others may read:
// the copied files are root's, so they are handed to postgres first.
const securePgScript = `set -e
D=/var/lib/locker/pg
S=` + securePgDir + `
run() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ ! -s $D/PG_VERSION ]; then
	chown postgres:postgres $S $S/*
	chmod 600 $S/server.key $S/pwfile
	mkdir -p $D
	chown postgres:postgres $D
	run initdb -D $D -A scram-sha-256 -U postgres --pwfile=$S/pwfile --no-sync >/tmp/initdb.log
	run cp $S/pg_hba.conf $D/pg_hba.conf
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D $D -p %d \
	-c listen_addresses='*' -c unix_socket_directories=/tmp \
	-c ssl=on -c ssl_cert_file=$S/server.crt -c ssl_key_file=$S/server.key -c ssl_ca_file=$S/ca.crt \
	-c password_encryption=scram-sha-256 %s
`

// SecurePostgres runs PostgreSQL 15 on port as production would: TLS only
// (the certificate and key of s), SCRAM-SHA-256 passwords for every
// network connection, the superuser postgres with s.Password, and a client
// certificate as well for members of PostgresClientCertRole. settings are
// more "name=value" server settings (-c).
func SecurePostgres(image string, port int, s PostgresSecrets, settings ...string) Spec {
	var c strings.Builder
	for _, st := range settings {
		c.WriteString(" -c " + shellQuote(st))
	}
	probeURL := (&url.URL{Scheme: "postgres", User: url.UserPassword("postgres", s.Password), Path: "/postgres",
		RawQuery: "sslmode=require"})
	probe := func(ctx context.Context, addr string) (string, error) {
		u := *probeURL
		u.Host = addr
		conn, err := pgx.Connect(ctx, u.String())
		if err != nil {
			return "", err
		}
		// Authenticated over TLS: the server serves clients; it reports
		// its version at start-up.
		v := conn.PgConn().ParameterStatus("server_version")
		_ = conn.Close(ctx)
		return "PostgreSQL " + v + " (TLS, SCRAM)", nil
	}
	return Spec{
		Kind:       "postgres",
		Image:      image,
		Entrypoint: []string{"sh", "-c", fmt.Sprintf(securePgScript, port, c.String())},
		Services:   []Service{{"postgres-secure", port, probe}},
		Data:       []string{PostgresData},
		Files: map[string]File{
			securePgDir + "/server.crt":  {Data: s.Cert},
			securePgDir + "/server.key":  {Data: s.Key, Mode: 0o600},
			securePgDir + "/ca.crt":      {Data: s.CA},
			securePgDir + "/pwfile":      {Data: []byte(s.Password + "\n"), Mode: 0o600},
			securePgDir + "/pg_hba.conf": {Data: []byte(securePgHBA)},
		},
	}
}
