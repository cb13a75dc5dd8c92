// Command holder is a lock holder in a process of its own, for the tests of
// package procfault, which stop it (SIGSTOP), resume it and kill it
// (SIGKILL) at chosen points. It opens a Locker from -url, opens the fenced
// resource -resource of the store -store at -store-addr (see
// procfault.OpenResource), then runs the commands it reads on stdin, one
// a line, and prints one line per event on stdout:
//
//	acquire       sending acquire, then granted TOKEN TTL_MS | acquire-error MSG
//	write VALUE   write TOKEN accepted | write TOKEN refused MSG | write TOKEN error MSG
//	refresh       sending refresh, then refreshed | refresh-error lost|other MSG
//	release       sending release, then released | release-error lost|other MSG
//	exit          closes everything and exits 0
//
// "sending X" is printed just before the request leaves: a test that holds
// the request in a proxy and kills the process after that line kills it
// with the request in flight. write uses the lease's token whether or not
// the lease is still held — the write of a holder paused between its check
// and its write — so that the fence, not the holder, must refuse it. When a
// lease ends other than by release, the holder prints lost MSG at once.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/distlock/locker"
	_ "github.com/distlock/locker/etcd"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/internal/procfault"
	_ "github.com/distlock/locker/postgres"
	"github.com/distlock/locker/redis"
	_ "github.com/distlock/locker/zookeeper"
	goredis "github.com/redis/go-redis/v9"
)

var out sync.Mutex

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

func main() {
	url := flag.String("url", "", "locker URL")
	key := flag.String("key", "k", "key to lock")
	ttl := flag.Duration("ttl", time.Second, "lease TTL")
	auto := flag.Bool("autorefresh", true, "refresh the lease in the background")
	store := flag.String("store", "", "store of the fenced resource: "+strings.Join(procfault.Kinds, ", "))
	storeAddr := flag.String("store-addr", "", "address (a DSN for postgres) of the store")
	resource := flag.String("resource", "r", "name of the fenced resource")
	timeout := flag.Duration("timeout", 30*time.Second, "bound of each command")
	flag.Parse()
	goredis.SetLogger(redis.GoRedisLogger(nil))
	if err := run(*url, *key, *ttl, *auto, *store, *storeAddr, *resource, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "holder:", err)
		os.Exit(1)
	}
}

func run(url, key string, ttl time.Duration, auto bool, store, storeAddr, resource string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	l, err := locker.Open(ctx, url)
	if err != nil {
		cancel()
		return err
	}
	defer l.Close()
	res, err := procfault.OpenResource(ctx, store, storeAddr, resource)
	cancel()
	if err != nil {
		return err
	}
	defer res.Close()
	say("ready")

	var lease locker.Lease
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		switch cmd {
		case "acquire":
			say("sending acquire")
			lz, err := l.Acquire(ctx, key, locker.WithTTL(ttl), locker.WithAutoRefresh(auto))
			if err != nil {
				say("acquire-error %s", oneLine(err))
				break
			}
			lease = lz
			say("granted %d %d", lz.Token(), locker.GrantedTTL(lz).Milliseconds())
			go func() {
				<-lz.Done()
				if err := lz.Err(); errors.Is(err, locker.ErrLeaseLost) {
					say("lost %s", oneLine(err))
				}
			}()
		case "write":
			if lease == nil {
				say("write 0 error no lease")
				break
			}
			switch err := res.Write(ctx, lease.Token(), arg); {
			case err == nil:
				say("write %d accepted", lease.Token())
			case errors.Is(err, fencing.ErrStaleToken):
				say("write %d refused %s", lease.Token(), oneLine(err))
			default:
				say("write %d error %s", lease.Token(), oneLine(err))
			}
		case "refresh", "release":
			if lease == nil {
				say("%s-error other no lease", cmd)
				break
			}
			say("sending %s", cmd)
			op, done := lease.Refresh, "refreshed"
			if cmd == "release" {
				op, done = lease.Release, "released"
			}
			switch err := op(ctx); {
			case err == nil:
				say("%s", done)
			case errors.Is(err, locker.ErrLeaseLost):
				say("%s-error lost %s", cmd, oneLine(err))
			default:
				say("%s-error other %s", cmd, oneLine(err))
			}
		case "exit":
			cancel()
			return nil
		default:
			say("unknown %q", cmd)
		}
		cancel()
	}
	return in.Err()
}
