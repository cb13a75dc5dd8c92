package zookeeper

import (
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/distlock/locker/driver"
)

// validateRoot checks that root is an absolute ZooKeeper path that this
// package can create: no empty, "." or ".." segments.
func validateRoot(root string) error {
	if !strings.HasPrefix(root, "/") {
		return errors.New("must start with /")
	}
	if root == "/" {
		return errors.New("must not be / itself: lock directories need a root of their own")
	}
	for _, seg := range strings.Split(strings.TrimSuffix(root[1:], "/"), "/") {
		switch {
		case seg == "", seg == ".", seg == "..":
			return errors.New("empty, . or .. segment")
		case strings.ContainsFunc(seg, refusedRune):
			return errors.New("a character ZooKeeper refuses in a path (control, U+D800–U+F8FF, U+FFF0 and above, or invalid UTF-8)")
		}
	}
	return nil
}

// refusedRune reports whether the server refuses r in a path. The server
// checks Java chars (UTF-16 units): U+0001–U+001F, U+007F–U+009F,
// U+D800–U+F8FF (which takes in the surrogates of every character above
// U+FFFF) and U+FFF0–U+FFFF. Invalid UTF-8 decodes to U+FFFD there and here.
func refusedRune(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0
}

// dir is the path of key's lock directory: the key in unpadded base64url, one
// segment (no "/", never "." or "..", no character ZooKeeper refuses), and
// injective, so distinct keys never share a directory.
func (b *backend) dir(key string) string {
	return b.root + "/" + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// ownerPrefix is the start of the names of owner's nodes; the server appends
// a ten-digit sequence number.
func ownerPrefix(owner driver.OwnerID) string { return owner.String() + "-" }

// child is one node of a lock directory.
type child struct {
	name string
	seq  int64
}

// sequence returns the sequence number of a node name made by this package.
func sequence(name string) (int64, bool) {
	if len(name) < 34 || name[32] != '-' {
		return 0, false
	}
	seq, err := strconv.ParseInt(name[33:], 10, 32)
	return seq, err == nil
}

// tied reports whether two children of a queue in parseChildren's order
// share a sequence number. ZooKeeper 3.8 stops a directory's counter at
// 2^31-1 (the parent's stored child version does not go past it), so every
// later child gets that number, and names no longer order the queue.
func tied(q []child) bool {
	for i := 1; i < len(q); i++ {
		if q[i].seq == q[i-1].seq {
			return true
		}
	}
	return false
}

// parseChildren returns the well-formed children of a lock directory in queue
// order. Nodes of other shapes (not made by this package) are left out.
//
// The sequence number is the directory's child version when the node was
// made: a signed 32-bit counter, which may go on past 2^31-1 at -2^31 (the
// name then ends in "--2147483648"), or stop there (see tied). Queue order is the counter's order with that
// wrap: a before b when b-a, computed modulo 2^32, is positive. It is a
// total order over any set of children spanning fewer than 2^31 numbers,
// which the nodes of one queue always do.
func parseChildren(names []string) []child {
	out := make([]child, 0, len(names))
	for _, n := range names {
		if seq, ok := sequence(n); ok {
			out = append(out, child{name: n, seq: seq})
		}
	}
	slices.SortFunc(out, func(a, b child) int {
		if d := int32(uint32(a.seq) - uint32(b.seq)); d != 0 {
			return int(d)
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}
