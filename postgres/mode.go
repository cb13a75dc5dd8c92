package postgres

import (
	"fmt"

	"github.com/distlock/locker"
)

// Mode is how a Locker holds its locks (URL parameter mode).
type Mode int

const (
	// ForUpdate, the default (mode=for_update): a lock is a row lock in a
	// transaction left open on a connection of its own.
	ForUpdate Mode = iota
	// Advisory (mode=advisory): a lock is a session-level advisory lock,
	// many of them on each of a few shared connections (advisory.go).
	Advisory
)

func (m Mode) String() string {
	switch m {
	case ForUpdate:
		return "for_update"
	case Advisory:
		return "advisory"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

func parseMode(s string) (Mode, error) {
	for _, m := range []Mode{ForUpdate, Advisory} {
		if s == m.String() {
			return m, nil
		}
	}
	return 0, fmt.Errorf("mode %q: want for_update or advisory", s)
}

// WithMode chooses how the Locker holds its locks: ForUpdate (the default)
// or Advisory (URL parameter mode=advisory).
func WithMode(m Mode) locker.Option {
	return option(func(c *config) error {
		if m != ForUpdate && m != Advisory {
			return fmt.Errorf("unknown mode %d", int(m))
		}
		c.mode = m
		return nil
	})
}
