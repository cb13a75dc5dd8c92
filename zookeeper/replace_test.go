package zookeeper_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/testenv"
)

// Member replacement (issue 20): the leader of a 3-server ensemble, then
// a follower, are each replaced by a fresh server under the same id (an
// empty data directory; the ensemble runs without dynamic
// reconfiguration, so this is its procedure), one after the other, the
// next only once the fresh one serves, while a holder holds a lock and
// waiters queue on it, all through clients given the original three
// addresses. Within the guarantee (a quorum keeps its data throughout):
// nobody else holds the lock while the holder's lease is live, the
// holder keeps it or is told it lost it (Done, ErrLeaseLost: its
// connection may stay down longer than 0.22·S), the lock's node survives
// both replacements, and the waiters take the lock in turn with tokens
// above the holder's, in token order at the fenced resource.
func TestEnsemble_MemberReplaced_NoSecondHolder_TokensRise(t *testing.T) {
	cl := testenv.ZooKeeperEnsemble(t)
	addrs := cl.Addrs() // the clients keep these, dead ones included
	root := freshRoot(t)
	const session = 6 * time.Second
	open := func(servers []string) locker.Locker {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		l, err := locker.Open(ctx, "zookeeper://"+strings.Join(servers, ",")+root+"?session_timeout="+session.String())
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	guard := fencing.NewMemory()
	var inside atomic.Int32
	write := func(token uint64) error {
		return guard.Write(context.Background(), "res", token, func() error {
			if inside.Add(1) > 1 {
				return errors.New("two holders inside the fenced resource at once")
			}
			time.Sleep(20 * time.Millisecond)
			inside.Add(-1)
			return nil
		})
	}

	holder, err := open(addrs).TryAcquire(ctxT(t, 30*time.Second), "k")
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := write(holder.Token()); err != nil {
		t.Fatalf("holder's write: %v", err)
	}
	var released atomic.Bool
	const waiters = 3
	errs := make(chan error, waiters)
	var wg sync.WaitGroup
	for range waiters {
		l := open(addrs)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A waiter's own session may be lost during a replacement:
			// it tries again, as a user would.
			ctx := ctxT(t, 3*time.Minute)
			for {
				lease, err := l.Acquire(ctx, "k")
				if err != nil {
					if ctx.Err() != nil {
						errs <- fmt.Errorf("waiter: %w", err)
						return
					}
					continue
				}
				if !released.Load() && !isDone(holder) {
					errs <- fmt.Errorf("a waiter acquired (token %d) while the holder's lease (token %d) was live", lease.Token(), holder.Token())
				}
				if lease.Token() <= holder.Token() {
					errs <- fmt.Errorf("waiter's token %d not above the holder's %d", lease.Token(), holder.Token())
				}
				err = write(lease.Token())
				_ = lease.Release(context.Background())
				errs <- err
				return
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // let the waiters queue

	leader := cl.Leader(t)
	for i, n := range cl.Nodes {
		if n == leader {
			cl.ReplaceZooKeeperMember(t, i)
			cl.ReplaceZooKeeperMember(t, (i+1)%len(cl.Nodes))
			break
		}
	}
	if !isDone(holder) {
		if err := holder.Refresh(ctxT(t, 30*time.Second)); err != nil && !isDone(holder) {
			t.Errorf("the holder's Refresh after the replacements: %v", err)
		}
	}
	if isDone(holder) {
		if !errors.Is(holder.Err(), locker.ErrLeaseLost) {
			t.Errorf("the holder's lease ended with %v, want ErrLeaseLost", holder.Err())
		}
		t.Logf("the holder lost its lease during the replacements, and was told: %v", holder.Err())
	} else if _, err := open(cl.Addrs()).TryAcquire(ctxT(t, 30*time.Second), "k"); !errors.Is(err, locker.ErrLocked) && !isDone(holder) {
		// The lock's node survived two fresh servers.
		t.Errorf("TryAcquire through the current servers while the holder holds = %v, want ErrLocked", err)
	}
	released.Store(true)
	_ = holder.Release(ctxT(t, 30*time.Second))
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func isDone(lease locker.Lease) bool {
	select {
	case <-lease.Done():
		return true
	default:
		return false
	}
}
