package etcd

import (
	"errors"
	"fmt"

	"github.com/distlock/locker"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusals are etcd's answers to credentials it does not accept or to an
// operation the user's roles do not permit. The client hands them out as
// rpctypes errors, or as bare gRPC statuses from streams and dialling.
var refusals = []error{
	rpctypes.ErrPermissionDenied, // no role grants the key range
	rpctypes.ErrAuthFailed,       // wrong user name or password
	rpctypes.ErrInvalidAuthToken, // token expired or the user deleted
	rpctypes.ErrUserEmpty,        // auth is on and no credentials were sent
}

// refused reports whether err is one of etcd's refusals.
func refused(err error) bool {
	var st interface{ GRPCStatus() *status.Status }
	if errors.As(err, &st) {
		switch st.GRPCStatus().Code() {
		case codes.PermissionDenied, codes.Unauthenticated:
			return true
		}
		twin := rpctypes.Error(st.(error)) // a bare status's rpctypes twin
		err = errors.Join(err, twin)
	}
	for _, r := range refusals {
		if errors.Is(err, r) {
			return true
		}
	}
	return false
}

// authError marks etcd's refusals with locker.ErrUnauthorized, keeping
// etcd's message: retrying cannot help until the credentials or the roles
// change, so they must not read as an outage (ErrUnavailable).
func authError(err error) error {
	if err == nil || errors.Is(err, locker.ErrUnauthorized) || !refused(err) {
		return err
	}
	return fmt.Errorf("%w: %w", locker.ErrUnauthorized, err)
}

// markRefusals is deferred by every operation the portable layer calls,
// so that each one reports a refusal the same way.
func markRefusals(err *error) { *err = authError(*err) }
