package election

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/distlock/locker"
)

// resignTimeout bounds one attempt of Run to resign.
const resignTimeout = 5 * time.Second

// Run is the loop of a service that does work only while it leads: it
// campaigns with value, runs fn with the term once it leads, resigns when fn
// returns, and campaigns again, until ctx ends. fn's context is cancelled
// the moment the term is lost (its cause is Term.Err); fn should then stop
// writing, and return. A campaign that fails for a passing reason (the
// backend unreachable), and one after a lost term, waits a backoff first.
//
// Run returns ctx's error once ctx ends; fn's error, after resigning, if fn
// fails while it still leads; and at once the error of a campaign that
// cannot succeed (a closed Locker, a value the backend cannot publish, a
// TTL it refuses). fn returning nil resigns and campaigns again: fn
// normally runs until its context ends.
func Run(ctx context.Context, e *Election, value string, fn func(ctx context.Context, t *Term) error) error {
	var b backoff
	for {
		t, err := e.Campaign(ctx, value)
		switch {
		case ctx.Err() != nil:
			if err == nil {
				resign(ctx, t)
			}
			return ctx.Err()
		case err != nil && permanent(err):
			return err
		case err != nil:
			d := b.next()
			e.log.LogAttrs(ctx, slog.LevelWarn, "election: campaign failed; campaigning again",
				slog.String("election", e.name), slog.Duration("after", d), slog.Any("err", err))
			if !sleep(ctx, d) {
				return ctx.Err()
			}
			continue
		}
		began := time.Now()
		lost, err := lead(ctx, t, fn)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case lost != nil:
			// Terms lost one after the other (a TTL too short for the
			// backend, say) are campaigned for ever more slowly; a term that
			// lasted starts the backoff over.
			if time.Since(began) >= maxBackoff {
				b.reset()
			}
			d := b.next()
			e.log.LogAttrs(ctx, slog.LevelWarn, "election: leadership lost; campaigning again",
				slog.String("election", e.name), slog.Uint64("token", t.Token()), slog.Duration("after", d), slog.Any("err", lost))
			if !sleep(ctx, d) {
				return ctx.Err()
			}
		case err != nil:
			return err
		default:
			b.reset()
		}
	}
}

// lead runs fn for the term t and resigns after it. It returns why the
// term was lost while fn ran, if it was, and fn's error.
func lead(ctx context.Context, t *Term, fn func(context.Context, *Term) error) (lost, err error) {
	fnCtx, cancel := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-t.Done():
			cancel(t.Err())
		case <-fnCtx.Done():
		}
	}()
	defer func() {
		cancel(nil)
		<-watched
		resign(ctx, t)
	}()
	err = fn(fnCtx, t)
	if terr := t.Err(); errors.Is(terr, locker.ErrLeaseLost) {
		return terr, err
	}
	return nil, err // held still, or resigned by fn itself
}

// resign gives the term up even when ctx has ended. A resignation whose
// outcome is unknown (the backend did not answer) is tried again until it
// succeeds or the term ends: a term left standing would keep refreshing,
// and this candidate's next campaign would wait behind its own lead.
func resign(ctx context.Context, t *Term) {
	var b backoff
	for {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
		err := t.Resign(rctx)
		cancel()
		if err == nil || t.Err() != nil {
			return
		}
		t.e.log.LogAttrs(ctx, slog.LevelWarn, "election: resign failed; trying again",
			slog.String("election", t.e.name), slog.Uint64("token", t.Token()), slog.Any("err", err))
		select {
		case <-t.Done():
			return
		case <-time.After(b.next()):
		}
	}
}
