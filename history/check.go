package history

import (
	"os"
	"testing"
)

// DirEnv names the environment variable that says where Check writes the
// visualisation of a failing history (CI keeps that directory as an
// artifact). Without it, Check uses the test's temporary directory and logs
// the path.
const DirEnv = "LOCKER_HISTORY_DIR"

// Check runs one bounded history against the lock service newLocker makes
// clients of, and fails t on any violation or on a check that ran out of
// time (unknown is never a pass). On failure it writes porcupine's HTML
// visualisation to $LOCKER_HISTORY_DIR (or t.TempDir()) and logs its path,
// and logs the smallest failing history found. It returns the result for
// callers that add up figures.
//
// A backend's test is one line:
//
//	func TestHistory(t *testing.T) { history.Check(t, newLocker, history.Options{TTL: time.Second}) }
func Check(t testing.TB, newLocker NewLocker, opts Options) *Result {
	t.Helper()
	res, err := Run(t.Context(), newLocker, opts)
	if err != nil {
		t.Fatalf("history: %v", err)
		return nil
	}
	t.Logf("history: %s", res.Counts)
	if res.OK() {
		return res
	}
	t.Errorf("history: %s", res)
	dir := os.Getenv(DirEnv)
	if dir == "" {
		dir = t.TempDir()
	}
	o, _ := opts.withDefaults()
	if path, err := res.WriteVisualization(dir, o.CheckTimeout); err != nil {
		t.Logf("history: writing the visualisation: %v", err)
	} else {
		t.Logf("history: visualisation of the failing history: %s", path)
	}
	return res
}
