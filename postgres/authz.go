package postgres

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/distlock/locker"
)

// codeInsufficientPrivilege is the SQLSTATE of a statement the role may not
// run (a missing GRANT); class 28 is a refused authentication.
const (
	codeInsufficientPrivilege = "42501"
	classInvalidAuthorization = "28" // 28000 (no pg_hba.conf entry, …), 28P01 (bad password)
)

// refused reports whether err carries the server's refusal of the
// credentials or of the operation to them.
func refused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) &&
		(pgErr.Code == codeInsufficientPrivilege || strings.HasPrefix(pgErr.Code, classInvalidAuthorization))
}

// authz classes err as locker.ErrUnauthorized when the server refused the
// credentials or the operation, keeping the server's message; other errors
// are returned as they are, and so is a lost lease: that the lease is
// gone is the news, the server's message stays in it. It is deferred by every method of the backend
// that talks to the server: authz(&err).
func authz(err *error) {
	if *err != nil && refused(*err) && !errors.Is(*err, locker.ErrUnauthorized) && !errors.Is(*err, locker.ErrLeaseLost) {
		*err = fmt.Errorf("%w: %w", locker.ErrUnauthorized, *err)
	}
}
