package postgres

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/distlock/locker"
)

// config is what the options of a Locker set.
type config struct {
	schema, table string
	maxConns      int // 0: the default budget, read from the server
	skipDDL       bool
	mode          Mode
}

// setting is the value of every option of this package (locker.BackendOption).
type setting func(*config) error

func option(f setting) locker.Option { return locker.BackendOption(Scheme, f) }

// WithSchema names the schema of the lock table and its sequence (default
// "public"; URL parameter schema). It is created if missing, unless
// WithSkipSchemaCreation.
func WithSchema(name string) locker.Option {
	return option(func(c *config) error {
		c.schema = name
		return checkName("schema", name, maxIdentLen)
	})
}

// WithTable names the lock table (default "locker_locks"; URL parameter
// table); its token sequence is the table's name + "_token", so the name
// has at most 57 bytes.
func WithTable(name string) locker.Option {
	return option(func(c *config) error {
		c.table = name
		return checkName("table", name, maxIdentLen-len(sequenceSuffix))
	})
}

// WithMaxConns sets the connection budget: how many connections the Locker
// pins at once, one per held lock or waiting Acquire (URL parameter
// max_conns). It is never more than the pool's MaxConns. The default is a
// quarter of the connections the server allows ordinary roles, read from
// the server.
func WithMaxConns(n int) locker.Option {
	return option(func(c *config) error {
		if n < 1 {
			return fmt.Errorf("max_conns %d: want at least 1", n)
		}
		c.maxConns = n
		return nil
	})
}

// WithSkipSchemaCreation, when true, never runs the DDL of schema.sql (URL
// parameter skip_schema_creation): a migration made the objects.
func WithSkipSchemaCreation(skip bool) locker.Option {
	return option(func(c *config) error {
		c.skipDDL = skip
		return nil
	})
}

// newConfig applies the settings of a BackendConfig; the caller wraps the
// error in its class (locker.ErrInvalidOption or locker.ErrInvalidURL).
func newConfig(settings []any) (config, error) {
	c := config{schema: DefaultSchema, table: DefaultTable}
	for _, s := range settings {
		f, ok := s.(setting)
		if !ok {
			return c, fmt.Errorf("unknown setting %T", s)
		}
		if err := f(&c); err != nil {
			return c, err
		}
	}
	return c, nil
}

// urlParams are the URL query parameters of this package, each the option
// of the same name; every other parameter goes to pgx.
var urlParams = []struct {
	name string
	opt  func(string) (locker.Option, error)
}{
	{"schema", func(v string) (locker.Option, error) { return WithSchema(v), nil }},
	{"table", func(v string) (locker.Option, error) { return WithTable(v), nil }},
	{"max_conns", func(v string) (locker.Option, error) {
		n, err := strconv.Atoi(v)
		return WithMaxConns(n), err
	}},
	{"mode", func(v string) (locker.Option, error) {
		m, err := parseMode(v)
		return WithMode(m), err
	}},
	{"skip_schema_creation", func(v string) (locker.Option, error) {
		b, err := strconv.ParseBool(v)
		return WithSkipSchemaCreation(b), err
	}},
}

// urlOptions takes this package's parameters out of q and returns their
// options; a bad value is an error naming the parameter.
func urlOptions(q url.Values) ([]locker.Option, error) {
	var opts []locker.Option
	for _, p := range urlParams {
		v, ok := q[p.name]
		if !ok {
			continue
		}
		q.Del(p.name)
		if len(v) != 1 {
			return nil, fmt.Errorf("%w: postgres: query parameter %s: given %d times", locker.ErrInvalidURL, p.name, len(v))
		}
		o, err := p.opt(v[0])
		if err == nil {
			// Validate the value now, so that the error names the parameter.
			_, err = newConfig(locker.SplitOptions(Scheme, []locker.Option{o}).Settings)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: postgres: query parameter %s=%q: %v", locker.ErrInvalidURL, p.name, v[0], err)
		}
		opts = append(opts, o)
	}
	return opts, nil
}
