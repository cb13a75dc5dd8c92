package secretcheck_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/distlock/locker"
	"github.com/distlock/locker/internal/secretcheck"
	_ "github.com/distlock/locker/memory"
)

// spy records what Check reports instead of failing the test.
type spy struct {
	testing.TB
	reports []string
}

func (s *spy) Errorf(format string, args ...any) {
	s.reports = append(s.reports, fmt.Sprintf(format, args...))
}
func (s *spy) Fatal(args ...any) { s.reports = append(s.reports, fmt.Sprint(args...)) }

// Check finds a secret wherever a Locker can put it — here a key that
// carries one goes into spans (the key attribute) and the error of a
// refused TryAcquire — and stays quiet about a secret that is nowhere.
func TestCheck_FindsSecretInSpansAndErrors(t *testing.T) {
	r := secretcheck.New()
	ctx := context.Background()
	l, err := locker.Open(ctx, "memory://", r.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "job-hunter2")
	if err != nil {
		t.Fatal(err)
	}
	_, refused := l.TryAcquire(ctx, "job-hunter2")
	if !errors.Is(refused, locker.ErrLocked) {
		t.Fatalf("second TryAcquire: %v, want ErrLocked", refused)
	}
	_ = lease.Release(ctx)

	s := &spy{TB: t}
	r.Check(s, []string{"hunter2"}, refused)
	joined := strings.Join(s.reports, "\n")
	for _, where := range []string{"in error 0", "in span"} {
		if !strings.Contains(joined, where) {
			t.Errorf("secret not reported %s; reports:\n%s", where, joined)
		}
	}
	clean := &spy{TB: t}
	r.Check(clean, []string{"correct-horse"}, refused)
	if len(clean.reports) != 0 {
		t.Errorf("a secret that appears nowhere was reported: %q", clean.reports)
	}
}

// A Recorder whose options were never used fails the check: seeing nothing
// proves nothing.
func TestCheck_NothingRecordedFails(t *testing.T) {
	s := &spy{TB: t}
	secretcheck.New().Check(s, []string{"x"})
	if len(s.reports) == 0 {
		t.Fatal("an unused Recorder passed the check")
	}
}
