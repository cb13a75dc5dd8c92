package postgres

import (
	"testing"
	"time"
)

// What a holder's application_name says survives the round trip, and says
// whether a holder record follows the grant (which Inspect waits for).
func TestHolderAppName_RoundTrip(t *testing.T) {
	for _, c := range []struct {
		label            string
		recorded         bool
		complete, record bool
	}{
		{"cron", false, true, false},
		{"cron", true, true, true},
		{"höst", false, false, true}, // not printable ASCII: in the record
		{"", true, true, true},
	} {
		suffix, complete := holderAppName(3*time.Second, c.label, c.recorded)
		h, ok := parseHolderApp(appPrefix + "42" + suffix)
		if !ok || h.token != 42 || h.ttl != 3*time.Second || complete != c.complete || h.complete != c.complete || h.recorded != c.record {
			t.Errorf("label %q recorded %v: parsed %+v (ok %v), complete %v; want complete %v, record %v",
				c.label, c.recorded, h, ok, complete, c.complete, c.record)
		}
		if c.complete && h.label != c.label {
			t.Errorf("label %q came back as %q", c.label, h.label)
		}
	}
}
