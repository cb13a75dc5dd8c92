package redis

import (
	"context"
	"errors"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// scriptBatch runs one script on one server for many callers, pipelining
// the runs asked for while an earlier batch is in flight into the next one.
// A lone run costs what Script.Run costs; N runs at once (the refreshes of N
// leases held by one Locker) cost a few pipelines instead of N round trips,
// N socket writes and N reads. Redlock refreshes every lease on every master,
// and a round trip each spent the client's CPU: at 10⁴ held leases the
// refreshes alone took more than the machine had (docs/benchmarks.md).
type scriptBatch struct {
	c      goredis.UniversalClient
	script *goredis.Script
	// background runs fn on a goroutine that the Locker's Close cancels
	// (through ctx) and waits for, and reports false, running nothing,
	// once the Locker is closed.
	background func(fn func(ctx context.Context)) bool

	mu    sync.Mutex
	queue []*batchCall
	busy  bool // a goroutine is sending batches
}

// batchCall is one run of the script in a batch.
type batchCall struct {
	id       int // the caller's number for it
	keys     []string
	args     []any
	deadline time.Time // when the batch it is in gives up
	res      int64
	err      error
	answered chan<- *batchCall // gets the call once res and err are set
}

// errBatchClosed is the error of a run asked for after the Locker closed.
var errBatchClosed = errors.New("redis: locker closed")

// start queues a run of the script with keys and args, which gives up after
// timeout; the call, numbered id, is sent on answered once it has run.
// answered must have room for it: the batch never waits for its caller, who
// may have stopped listening (a Redlock refresh returns once a quorum has
// answered).
func (b *scriptBatch) start(timeout time.Duration, answered chan<- *batchCall, id int, keys []string, args ...any) {
	call := &batchCall{id: id, keys: keys, args: args, deadline: time.Now().Add(timeout), answered: answered}
	b.mu.Lock()
	b.queue = append(b.queue, call)
	idle := !b.busy
	b.busy = true
	b.mu.Unlock()
	if idle && !b.background(b.send) {
		b.mu.Lock()
		calls := b.queue
		b.queue, b.busy = nil, false
		b.mu.Unlock()
		for _, c := range calls {
			c.finish(0, errBatchClosed)
		}
	}
}

func (c *batchCall) finish(res int64, err error) {
	c.res, c.err = res, err
	c.answered <- c
}

// send runs the queued calls, a batch at a time, until none is left or
// ctx ends (each batch then fails at once).
func (b *scriptBatch) send(ctx context.Context) {
	for {
		b.mu.Lock()
		calls := b.queue
		b.queue = nil
		if len(calls) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		b.run(ctx, calls)
	}
}

// run sends calls in one pipeline, bounded by the earliest deadline among
// them. A server that has not cached the script yet answers NOSCRIPT; those
// calls are sent again with the script's body, as Script.Run does.
func (b *scriptBatch) run(ctx context.Context, calls []*batchCall) {
	deadline := calls[0].deadline
	for _, c := range calls[1:] {
		if c.deadline.Before(deadline) {
			deadline = c.deadline
		}
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cmds := b.pipeline(ctx, calls, false)
	var again []*batchCall
	var againAt []int
	for i, cmd := range cmds {
		if err := cmd.Err(); err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") {
			again, againAt = append(again, calls[i]), append(againAt, i)
		}
	}
	if len(again) > 0 {
		for j, cmd := range b.pipeline(ctx, again, true) {
			cmds[againAt[j]] = cmd
		}
	}
	for i, cmd := range cmds {
		calls[i].finish(cmd.Int64())
	}
}

func (b *scriptBatch) pipeline(ctx context.Context, calls []*batchCall, withBody bool) []*goredis.Cmd {
	cmds := make([]*goredis.Cmd, len(calls))
	// Exec's error is the first command's, which each cmd carries too.
	_, _ = b.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, c := range calls {
			if withBody {
				cmds[i] = b.script.Eval(ctx, p, c.keys, c.args...)
			} else {
				cmds[i] = b.script.EvalSha(ctx, p, c.keys, c.args...)
			}
		}
		return nil
	})
	return cmds
}
