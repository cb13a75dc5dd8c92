package conformance_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/distlock/locker/conformance"
)

// TestToy_Sound shows the toy service passes the suite without flaws, so
// that the failures below are the flaws' doing.
func TestToy_Sound(t *testing.T) {
	conformance.Run(t, newToyHarness(""))
}

const flawEnv = "LOCKER_CONFORMANCE_FLAW"

// TestToyChild runs the suite over a flawed toy. It runs only as the child
// process of TestTeeth, which expects it to fail.
func TestToyChild(t *testing.T) {
	flaw := os.Getenv(flawEnv)
	if flaw == "" {
		return // runs only as the child process of TestTeeth
	}
	conformance.Run(t, newToyHarness(flaw))
}

// TestTeeth proves the suite fails a deliberately broken backend in the
// subtests that should catch each flaw.
func TestTeeth(t *testing.T) {
	cases := map[string][]string{
		flawConstantTokens: {
			"Acquire_WaitsForRelease_ThenLargerToken",
			"MutualExclusion_ManyClients_CounterExactTokensIncrease",
			"Crash_HolderDies_OtherAcquiresWithinTTL",
			"PausedHolder_LosesLease_StaleReleaseAndWriteRefused",
			"Election_OneLeaderAtATime_FencedTermsIncrease",
			"Election_Resign_HandsOverToWaitingCandidate",
			"Election_LeaderLost_SuccessorLeads_StaleWriteRefused",
			"Election_LeaderCrashes_ReplacedWithinTTL",
		},
		flawUnconditionalRelease: {
			"PausedHolder_LosesLease_StaleReleaseAndWriteRefused",
		},
		flawLeakyClose: {
			"TryAcquire_FreeKey_GrantsPositiveToken",
			"Acquire_WaitsForRelease_ThenLargerToken",
		},
		flawNeverExpire: {
			"Crash_HolderDies_OtherAcquiresWithinTTL",
			"PausedHolder_LosesLease_StaleReleaseAndWriteRefused",
			"Election_LeaderCrashes_ReplacedWithinTTL",
		},
	}
	failLine := regexp.MustCompile(`(?m)^\s*--- FAIL: TestToyChild/(\S+)`)
	for flaw, want := range cases {
		t.Run(flaw, func(t *testing.T) {
			t.Parallel()
			run := "^TestToyChild$"
			if flaw == flawLeakyClose {
				// Every subtest would wait out the leak check's grace: run
				// only the ones checked.
				run += "/^(" + strings.Join(want, "|") + ")$"
			}
			cmd := exec.Command(os.Args[0], "-test.run="+run, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), flawEnv+"="+flaw)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed a backend with flaw %s:\n%s", flaw, out)
			}
			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			for _, name := range want {
				if !slices.Contains(failed, name) {
					t.Errorf("flaw %s: subtest %s did not fail (failed: %v)", flaw, name, failed)
				}
			}
			if t.Failed() {
				t.Logf("child output:\n%s", out)
			}
		})
	}
}
