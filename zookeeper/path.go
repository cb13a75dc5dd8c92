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
		case strings.ContainsFunc(seg, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r >= 0xfff0 }):
			return errors.New("control or non-character in a segment")
		}
	}
	return nil
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

// parseChildren returns the well-formed children of a lock directory in queue
// order. Nodes of other shapes (not made by this package) are left out.
func parseChildren(names []string) []child {
	out := make([]child, 0, len(names))
	for _, n := range names {
		i := strings.LastIndexByte(n, '-')
		if i != 32 {
			continue
		}
		seq, err := strconv.ParseInt(n[i+1:], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, child{name: n, seq: seq})
	}
	slices.SortFunc(out, func(a, b child) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}
