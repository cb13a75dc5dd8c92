package locker

import (
	"context"
	"errors"
	"fmt"
)

// Publish replaces the value published with a held lease (WithValue), for
// everyone who inspects or watches its key, without giving the lock up. It
// returns ErrLeaseLost, and ends the lease, when the backend finds the lock
// no longer held by this lease; ErrUnsupported for a backend that cannot
// store a value. Any other error leaves the published value unknown and the
// lease as it was.
func Publish(ctx context.Context, l Lease, value string) error {
	ls, ok := l.(*lease)
	if !ok {
		return fmt.Errorf("publish: %w: not a Lease of package locker", ErrUnsupported)
	}
	c := ls.c
	if c.pub == nil {
		return &opError{c.name, "publish", ls.key, fmt.Errorf("%w: a published value", ErrUnsupported)}
	}
	if err := validateValue(value); err != nil {
		return &opError{c.name, "publish", ls.key, fmt.Errorf("%w: %v", ErrInvalidOption, err)}
	}
	if err := ls.Err(); err != nil {
		return err
	}
	if err := ls.turn(ctx); err != nil {
		return &opError{c.name, "publish", ls.key, err}
	}
	defer ls.endTurn()
	if err := ls.Err(); err != nil {
		return err
	}
	err := c.pub.Publish(ctx, ls.dl, value)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaseLost):
		ls.lose(wrapError(ctx, c.name, "publish", ls.key, err), iPublish)
		return ls.Err()
	default:
		return wrapError(ctx, c.name, "publish", ls.key, err)
	}
}
