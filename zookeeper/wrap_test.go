package zookeeper_test

import (
	"encoding/binary"
	"hash/adler32"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/testenv"
)

// jute appends values in ZooKeeper's serialisation (big-endian, strings and
// buffers length-prefixed).
type jute []byte

func (j jute) int(v int32) jute  { return binary.BigEndian.AppendUint32(j, uint32(v)) }
func (j jute) long(v int64) jute { return binary.BigEndian.AppendUint64(j, uint64(v)) }
func (j jute) str(s string) jute { return append(j.int(int32(len(s))), s...) }

// txnLog is a ZooKeeper transaction log file of persistent-node creates,
// the i-th with zxid i+1; parentCVersion[i] is the child version the
// create gives its parent (-1: the next one, as a client's create would).
func txnLog(paths []string, parentCVersion []int32) []byte {
	out := jute(nil).int(0x5a4b4c47).int(2).long(0) // "ZKLG", version 2, dbid 0
	now := time.Now().UnixMilli()
	for i, p := range paths {
		const opCreate = 1
		txn := jute(nil).long(0).int(0).long(int64(i + 1)).long(now).int(opCreate) // TxnHeader
		txn = txn.str(p).int(0)                                                    // path, empty data
		txn = txn.int(1).int(31).str("world").str("anyone")                        // ACL: all to anyone
		txn = append(txn, 0)                                                       // not ephemeral
		txn = txn.int(parentCVersion[i])
		out = out.long(int64(adler32.Checksum(txn)))
		out = append(out.int(int32(len(txn))), txn...)
		out = append(out, 'B') // end of record
	}
	return out
}

// Issue 15, item 12: ZooKeeper names a sequential node after its parent's
// child version, a signed 32-bit counter. Past 2^31-1, names of creates
// pipelined in one batch end in negative numbers ("…--2147483648"), which
// the queue dropped as foreign nodes; and ZooKeeper 3.8 stops the stored
// counter at 2^31-1, so every later node gets that same number, and the
// queue ordered by name alone (seen: a waiter granted while the lock was
// held). The directory here starts with its
// counter a few steps below 2^31 (the server is started over a transaction
// log that says so), and two Lockers hand the lock to each other across it:
// every waiter is granted, only after the holder released, in turn.
func TestQueue_SequenceCounterPast2to31_StillGrantsInOrder(t *testing.T) {
	const root = "/wrap"
	dir := lockDir(root, "k")
	seed := dir + "/seed"
	// The server names the next child after the seed's parentCVersion and
	// counts on from there. (The cversion a Stat reports is another number:
	// twice the creates less the children present.)
	srv := testenv.ZooKeeperFromLog(t, txnLog(
		[]string{root, dir, seed},
		[]int32{-1, -1, math.MaxInt32 - 4}))
	addr := []string{srv.Addr()}
	conn := rawConn(t, addr, nil)
	if err := conn.Delete(seed, -1); err != nil {
		t.Fatalf("delete %s: %v", seed, err)
	}
	// first is the first node's name; past is set once the counter went
	// past 2^31-1: two nodes of a queue with the same number (ZooKeeper 3.8
	// stops the counter there), or a negative one.
	var first string
	past := false

	lockers := [2]locker.Locker{dial(t, addr, root), dial(t, addr, root)}
	ctx := ctxT(t, 60*time.Second)
	held, err := lockers[0].Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		next := lockers[(i+1)%2]
		kids, _, err := conn.Children(dir)
		if err != nil || len(kids) != 1 {
			t.Fatalf("round %d: queue %v (%v), want the holder's node alone", i, kids, err)
		}
		holder := dir + "/" + kids[0]
		type result struct {
			l   locker.Lease
			err error
		}
		res := make(chan result, 1)
		go func() {
			l, err := next.Acquire(ctx, "k")
			res <- result{l, err}
		}()
		// Release once the waiter waits: it watches the holder's node (as
		// does the holder itself).
		for {
			kids, _, err = conn.Children(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(kids) == 2 && len(watchedPaths(t, srv.Addr(), holder, true)) == 2 {
				t.Logf("round %d: queue %v", i, kids)
				if first == "" {
					first = kids[0]
				}
				if kids[0][33:] == kids[1][33:] || strings.Contains(kids[0]+kids[1], "--") {
					past = true
				}
				break
			}
			select {
			case r := <-res:
				t.Fatalf("round %d: Acquire returned (%v) while the lock was held, queue %v", i, r.err, kids)
			case <-time.After(10 * time.Millisecond):
			}
		}
		if err := held.Release(ctx); err != nil {
			t.Fatalf("round %d: Release: %v", i, err)
		}
		r := <-res
		if r.err != nil {
			t.Fatalf("round %d: contended Acquire: %v", i, r.err)
		}
		held = r.l
	}
	_ = held.Release(ctx)
	if !strings.HasSuffix(first, strconv.Itoa(math.MaxInt32-4)) && !strings.HasSuffix(first, strconv.Itoa(math.MaxInt32-3)) || !past {
		t.Fatalf("first node %q, past 2^31-1: %v: the sequence counter did not start near 2^31 or did not pass it", first, past)
	}
}
