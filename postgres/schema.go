package postgres

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

//go:embed schema.sql
var schemaSQL string

//go:embed guard.sql
var guardSQL string

// Default names of the objects the backend creates.
const (
	DefaultSchema     = "public"
	DefaultTable      = "locker_locks"
	DefaultFenceTable = "locker_fences"
)

// maxIdentLen is PostgreSQL's identifier limit (NAMEDATALEN-1). Longer names
// are silently truncated by the server, so two long names could end up
// naming the same table: they are refused instead.
const maxIdentLen = 63

// sequenceSuffix names the token sequence after its table.
const sequenceSuffix = "_token"

// schemaLockKey is the pg_advisory_xact_lock key under which schema objects
// are created, so that concurrent first uses do not race on the catalog
// ("duplicate key value violates unique constraint pg_type_typname_nsp_index").
const schemaLockKey int64 = 0x6c6f636b65720001 // "locker" 0001

// checkName reports whether name can be used as a PostgreSQL identifier of at
// most max bytes. Any other character is allowed: names are always quoted.
func checkName(what, name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("%s name is empty", what)
	case len(name) > max:
		return fmt.Errorf("%s name %q is %d bytes, more than %d", what, name, len(name), max)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s name is not valid UTF-8", what)
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%s name contains a NUL byte", what)
	}
	return nil
}

// names are the quoted, schema-qualified identifiers of one lock table.
type names struct {
	table    string // "schema"."table"
	sequence string // "schema"."table_token"
	ddl      string // schema.sql with the placeholders replaced
	schema   string // unquoted, for the existence check
	relname  string // unquoted table name, for the existence check
	channel  string // unquoted: the NOTIFY channel of the table's locks
}

// recordColumns are the columns of holder records (schema.sql), which
// tables made before them lack until the DDL runs again.
var recordColumns = []string{"owner", "token", "label", "value", "permits", "held_until"}

func newNames(schema, table string) (names, error) {
	if err := checkName("schema", schema, maxIdentLen); err != nil {
		return names{}, err
	}
	if err := checkName("table", table, maxIdentLen-len(sequenceSuffix)); err != nil {
		return names{}, err
	}
	qs := pgx.Identifier{schema}.Sanitize()
	qt := pgx.Identifier{table}.Sanitize()
	qq := pgx.Identifier{table + sequenceSuffix}.Sanitize()
	ddl := strings.NewReplacer("{{schema}}", qs, "{{table}}", qt, "{{sequence}}", qq).Replace(schemaSQL)
	sum := sha256.Sum256([]byte(qs + "." + qt))
	return names{
		table:    qs + "." + qt,
		sequence: qs + "." + qq,
		ddl:      ddl,
		schema:   schema,
		relname:  table,
		// A channel name is an identifier (at most 63 bytes): a hash of the
		// table's name, so that every table has its own.
		channel: "locker_" + hex.EncodeToString(sum[:16]),
	}, nil
}

// createObjects runs ddl on conn unless every relation in rels already
// exists and the first has every column in cols. The existence check comes
// first because CREATE … IF NOT EXISTS (and ADD COLUMN IF NOT EXISTS) still
// demands the privilege, which an application role that runs against a
// migrated schema need not have.
func createObjects(ctx context.Context, conn *pgx.Conn, schema, ddl string, cols []string, rels ...string) error {
	var missing bool
	err := conn.QueryRow(ctx, "SELECT bool_or(to_regclass(r) IS NULL) OR "+
		"(SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass(($1::text[])[1]) AND attname = ANY($2::text[]) AND NOT attisdropped) < coalesce(cardinality($2::text[]), 0) "+
		"FROM unnest($1::text[]) AS r", rels, cols).Scan(&missing)
	if err != nil {
		return fmt.Errorf("checking for %v: %w", rels, err)
	}
	if !missing {
		return nil
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", schemaLockKey); err != nil {
			return err
		}
		var haveSchema bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&haveSchema); err != nil {
			return err
		}
		if !haveSchema {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
				return err
			}
		}
		// No arguments: the simple protocol runs the whole file.
		_, err := tx.Exec(ctx, ddl)
		return err
	})
	if err != nil {
		return fmt.Errorf("creating schema objects: %w", err)
	}
	return nil
}

// onceCtx runs a fallible initialisation once, retrying after failures, with
// waiters honouring their contexts (a sync.Once would block them without one).
type onceCtx struct {
	sem  chan struct{}
	done chan struct{}
}

func newOnceCtx() *onceCtx {
	return &onceCtx{sem: make(chan struct{}, 1), done: make(chan struct{})}
}

func (o *onceCtx) do(ctx context.Context, f func() error) error {
	select {
	case <-o.done:
		return nil
	default:
	}
	select {
	case o.sem <- struct{}{}:
	case <-o.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-o.sem }()
	select {
	case <-o.done:
		return nil
	default:
	}
	if err := f(); err != nil {
		return err
	}
	close(o.done)
	return nil
}
