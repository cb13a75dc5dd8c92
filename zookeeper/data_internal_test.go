package zookeeper

import (
	"testing"
	"time"
)

// A node's data carries label, session timeout, limit and value; data
// written before values existed (the label alone) still reads as that
// label, of a plain lock (limit 1).
func TestNodeData_RoundTripAndBareLabel(t *testing.T) {
	for _, d := range []nodeData{
		{limit: 1},
		{label: "worker-1", ttl: 15 * time.Second, limit: 1},
		{label: "a\x00\x01b", ttl: time.Millisecond, limit: 1, value: "leader=10.0.0.7:8080"},
		{value: "\x00\x01", limit: 1},
		{label: "permit", ttl: 5 * time.Second, limit: 3, value: "v"},
	} {
		if got := decodeData(d.encode()); got != d {
			t.Errorf("decodeData(encode(%+v)) = %+v", d, got)
		}
	}
	for _, label := range []string{"", "worker-1", "\x00", "\x00\x01", "\x00\x01\x05\x09x", "\x00\x02ab"} {
		got := decodeData([]byte(label))
		if got.label != label || got.ttl != 0 || got.value != "" || got.limit != 1 {
			t.Errorf("decodeData(%q) = %+v, want the bare label", label, got)
		}
	}
}
