package redis

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/distlock/locker"
	goredis "github.com/redis/go-redis/v9"
)

// refusalCodes are the error codes with which Redis refuses a client its
// credentials (NOAUTH: none given, WRONGPASS: wrong ones) or a permission
// (NOPERM: an ACL denies the command, a key or a channel).
var refusalCodes = []string{"NOAUTH", "WRONGPASS", "NOPERM"}

// scriptRefusal starts the message of Redis 7.0's refusal of a command a
// script calls.
const scriptRefusal = "The user executing the script can't "

// refused returns err wrapped in locker.ErrUnauthorized when it is such a
// refusal, or the server's refusal of the client's TLS certificate, and
// err otherwise. The server's message is kept: it names the command, key or
// channel denied.
func refused(err error) error {
	if err == nil || errors.Is(err, locker.ErrUnauthorized) {
		return err
	}
	if isRefusal(err) {
		return fmt.Errorf("%w: %w", locker.ErrUnauthorized, err)
	}
	return err
}

// isRefusal reports whether err is one of refused's.
func isRefusal(err error) bool {
	var reply goredis.Error
	if errors.As(err, &reply) {
		msg := reply.Error()
		for _, code := range refusalCodes {
			if strings.HasPrefix(msg, code+" ") || strings.Contains(msg, ": "+code+" ") {
				return true
			}
		}
		// Redis 7.0 refuses a script's command, key or channel with a
		// plain ERR (7.2 says NOPERM).
		if strings.Contains(msg, scriptRefusal) {
			return true
		}
	}
	// The TLS alert a server sends a client whose certificate it refuses
	// (none given, or not signed by its CA) arrives on the first read.
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		switch op.Err.Error() {
		case "tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority",
			"tls: certificate unknown", "tls: access denied":
			return true
		}
	}
	return false
}

// refusedTo wraps refused for a method's named error result:
// defer refusedTo(&err).
func refusedTo(err *error) { *err = refused(*err) }

// refusedByQuorum wraps err, a Redlock error that gathers the failures of
// its masters in one errors.Join, in locker.ErrUnauthorized when the
// masters that refused the credentials or a permission are more than a
// majority can spare: those refusals alone deny the quorum, and no outage
// ending will help. Fewer refusals are one failure among others.
func (r *redlock) refusedByQuorum(err *error) {
	if *err == nil || errors.Is(*err, locker.ErrUnauthorized) || errors.Is(*err, locker.ErrLocked) {
		return
	}
	for e := *err; e != nil; e = errors.Unwrap(e) {
		j, ok := e.(interface{ Unwrap() []error })
		if !ok {
			continue
		}
		n := 0
		for _, m := range j.Unwrap() {
			if isRefusal(m) {
				n++
			}
		}
		if n > len(r.nodes)-r.quorum {
			*err = fmt.Errorf("%w: %w", locker.ErrUnauthorized, *err)
		}
		return
	}
}
