package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/distlock/locker"
)

// SchemaSQL returns the statements that create (or bring up to date) the
// lock table of table in schema, which must exist, and its token sequence:
// schema.sql with the names filled in, for a migration or an operator to
// run as the schema's owner when the application runs
// WithSkipSchemaCreation.
func SchemaSQL(schema, table string) (string, error) {
	n, err := newNames(schema, table)
	if err != nil {
		return "", fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	return n.ddl, nil
}

// GrantSQL returns the GRANT statements that let role use the lock table of
// schema and table, and nothing more: what a Locker of either mode needs
// once the schema exists (docs/design/security-postgres.md).
func GrantSQL(schema, table, role string) (string, error) {
	n, err := newNames(schema, table)
	if err == nil {
		err = checkName("role", role, maxIdentLen)
	}
	if err != nil {
		return "", fmt.Errorf("%w: postgres: %w", locker.ErrInvalidOption, err)
	}
	r := pgx.Identifier{role}.Sanitize()
	return "GRANT USAGE ON SCHEMA " + pgx.Identifier{schema}.Sanitize() + " TO " + r + ";\n" +
		"GRANT SELECT, INSERT, UPDATE ON TABLE " + n.table + " TO " + r + ";\n" +
		"GRANT USAGE, SELECT, UPDATE ON SEQUENCE " + n.sequence + " TO " + r + ";\n", nil
}

// checkObjectsSQL reads, without touching the objects (the catalogs are
// readable by every role): whether the schema exists and the role may use
// it, the objects and columns missing, and the privileges the role lacks.
// $1 schema, $2 table, $3 sequence (unquoted), $4 the holder-record columns.
const checkObjectsSQL = `WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = $1),
want(name, kind, privs) AS (VALUES ($2::text, 'r'::"char", ARRAY['SELECT', 'INSERT', 'UPDATE']),
	($3::text, 'S'::"char", ARRAY['SELECT', 'UPDATE'])),
found AS (SELECT w.*, c.oid FROM want w LEFT JOIN pg_class c
	ON c.relname = w.name AND c.relkind = w.kind AND c.relnamespace = (SELECT oid FROM ns))
SELECT EXISTS (SELECT 1 FROM ns),
	coalesce((SELECT has_schema_privilege(oid, 'USAGE') FROM ns), false),
	ARRAY(SELECT name || CASE kind WHEN 'r' THEN ' (table)' ELSE ' (sequence)' END FROM found WHERE oid IS NULL),
	ARRAY(SELECT col FROM unnest($4::text[]) AS col, found f WHERE f.kind = 'r' AND f.oid IS NOT NULL
		AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = f.oid AND a.attname = col AND NOT a.attisdropped)),
	ARRAY(SELECT p || ' ON ' || name FROM found, unnest(privs) AS p WHERE oid IS NOT NULL
		AND NOT CASE kind WHEN 'r' THEN has_table_privilege(oid, p) ELSE has_sequence_privilege(oid, p) END),
	current_user`

// checkObjects is the check of WithSkipSchemaCreation: the lock table, its
// columns and its sequence exist (else locker.ErrInvalidOption naming what
// is missing: the option says a migration made them) and the role may use
// them (else locker.ErrUnauthorized naming the missing privileges).
func checkObjects(ctx context.Context, conn *pgx.Conn, n names) error {
	var (
		haveSchema, usage bool
		missing, columns  []string
		lacking           []string
		role              string
	)
	err := conn.QueryRow(ctx, checkObjectsSQL, n.schema, n.relname, n.relname+sequenceSuffix, recordColumns).
		Scan(&haveSchema, &usage, &missing, &columns, &lacking, &role)
	if err != nil {
		return fmt.Errorf("checking the schema: %w", err)
	}
	if !haveSchema {
		missing = []string{"schema " + n.schema}
	}
	for _, c := range columns {
		missing = append(missing, "column "+c+" of "+n.relname)
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: postgres: skip_schema_creation is set but schema %q lacks %s: run the statements of postgres.SchemaSQL as the schema's owner",
			locker.ErrInvalidOption, n.schema, strings.Join(missing, ", "))
	}
	if !usage {
		lacking = append([]string{"USAGE ON SCHEMA " + n.schema}, lacking...)
	}
	if len(lacking) > 0 {
		return fmt.Errorf("%w: postgres: role %q lacks %s in schema %q: grant what postgres.GrantSQL says",
			locker.ErrUnauthorized, role, strings.Join(lacking, ", "), n.schema)
	}
	return nil
}
