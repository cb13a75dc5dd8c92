package sqlguard

import (
	"database/sql/driver"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// Dialect is the SQL dialect of a Guard's database: placeholders and upsert
// syntax differ between engines.
type Dialect int

const (
	// PostgreSQL (9.5 or later), through pgx's stdlib or lib/pq.
	PostgreSQL Dialect = iota + 1
	// SQLite (3.24 or later), through modernc.org/sqlite, mattn/go-sqlite3 or
	// another driver whose package path contains "sqlite".
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case PostgreSQL:
		return "PostgreSQL"
	case SQLite:
		return "SQLite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// detect tells the dialect from the Go package of the driver, without
// importing any driver.
func detect(d driver.Driver) (Dialect, bool) {
	t := reflect.TypeOf(d)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return 0, false
	}
	switch p := t.PkgPath(); {
	case strings.Contains(p, "sqlite"):
		return SQLite, true
	case strings.HasPrefix(p, "github.com/jackc/pgx/"), p == "github.com/lib/pq":
		return PostgreSQL, true
	}
	return 0, false
}

// statements are the three statements of a Guard, for one table in one
// dialect. The upsert inserts the resource's row or raises its token, and
// changes no row when the stored token is higher: its affected-row count is
// the verdict. Both dialects count a row updated to the same token, so an
// equal token is admitted.
type statements struct {
	create, upsert, highest string
}

func (d Dialect) statements(table string) statements {
	switch d {
	case PostgreSQL:
		// The same table as the postgres backend's Guard (guard.sql there).
		return statements{
			create: "CREATE TABLE IF NOT EXISTS " + table + " (resource text PRIMARY KEY, token bigint NOT NULL CHECK (token > 0))",
			upsert: "INSERT INTO " + table + " AS f (resource, token) VALUES ($1, $2) " +
				"ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token WHERE f.token <= EXCLUDED.token",
			highest: "SELECT token FROM " + table + " WHERE resource = $1",
		}
	default: // SQLite; New refuses any other value
		return statements{
			create: "CREATE TABLE IF NOT EXISTS " + table + " (resource TEXT PRIMARY KEY NOT NULL, token INTEGER NOT NULL CHECK (token > 0)) WITHOUT ROWID",
			// In DO UPDATE, a bare column is the stored row's value.
			upsert: "INSERT INTO " + table + " (resource, token) VALUES (?1, ?2) " +
				"ON CONFLICT (resource) DO UPDATE SET token = excluded.token WHERE token <= excluded.token",
			highest: "SELECT token FROM " + table + " WHERE resource = ?1",
		}
	}
}

// maxIdentLen is PostgreSQL's identifier limit (NAMEDATALEN-1): a longer
// name would be truncated silently, and two names could meet.
const maxIdentLen = 63

// quoteIdent quotes name as an SQL identifier (both dialects use double
// quotes), after refusing names no engine can hold.
func quoteIdent(what, name string) (string, error) {
	switch {
	case name == "":
		return "", fmt.Errorf("%s name is empty", what)
	case len(name) > maxIdentLen:
		return "", fmt.Errorf("%s name %q is %d bytes, more than %d", what, name, len(name), maxIdentLen)
	case !utf8.ValidString(name) || strings.IndexByte(name, 0) >= 0:
		return "", fmt.Errorf("%s name %q is not UTF-8 without NUL", what, name)
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`, nil
}
