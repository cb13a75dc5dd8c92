package election

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/distlock/locker"
)

// Observe returns a channel that receives the leader, then every change of
// leader or of its proclaimed value, in term order: a leader with a lower
// token than one already sent is never sent. Changes that come faster than
// they are received are coalesced into the latest. A watch that breaks (the
// backend unreachable for a while) is started again with backoff, and what
// changed meanwhile is sent as one change. The channel is closed when ctx
// ends, and earlier when watching cannot succeed: a backend that cannot
// watch (locker.ErrUnsupported) or a closed Locker. Its goroutine ends with
// ctx.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	go e.observe(ctx, ch)
	return ch
}

func (e *Election) observe(ctx context.Context, ch chan<- Leader) {
	defer close(ch)
	var (
		last Leader
		b    backoff
	)
	for {
		err := e.watch(ctx, ch, &last, b.reset)
		if ctx.Err() != nil {
			return
		}
		if permanent(err) {
			e.log.LogAttrs(ctx, slog.LevelError, "election: cannot observe", slog.String("election", e.name), slog.Any("err", err))
			return
		}
		d := b.next()
		e.log.LogAttrs(ctx, slog.LevelWarn, "election: watch broke; watching again",
			slog.String("election", e.name), slog.Duration("after", d), slog.Any("err", err))
		if !sleep(ctx, d) {
			return
		}
	}
}

// errWatchEnded: a watch ended without saying why.
var errWatchEnded = errors.New("election: watch ended")

// watch follows one watch of the election's lock, sending each leader
// newer than *last, until the watch breaks or ctx ends. It calls ok after
// every state the watch yields: the watch works, so backoff starts over.
func (e *Election) watch(ctx context.Context, ch chan<- Leader, last *Leader, ok func()) error {
	for info, err := range locker.Watch(ctx, e.l, e.name) {
		if err != nil {
			return err
		}
		ok()
		if !info.Held {
			continue
		}
		ld := leaderOf(info)
		if ld.Token < last.Token || ld.Token == last.Token && ld.Value == last.Value {
			continue // already sent, or older than what was
		}
		select {
		case ch <- ld:
			*last = ld
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errWatchEnded
}

// Backoff bounds between attempts (a campaign that failed, a watch that
// broke): doubling from the first to the cap, each wait drawn at random
// from its upper half, so that candidates cut off together do not all
// come back at once.
const (
	firstBackoff = 50 * time.Millisecond
	maxBackoff   = 5 * time.Second
)

// backoff is the wait between attempts; the zero value starts at
// firstBackoff.
type backoff struct{ d time.Duration }

func (b *backoff) next() time.Duration {
	b.d = min(max(2*b.d, firstBackoff), maxBackoff)
	return b.d/2 + rand.N(b.d/2+1)
}

func (b *backoff) reset() { b.d = 0 }

// sleep waits for d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
