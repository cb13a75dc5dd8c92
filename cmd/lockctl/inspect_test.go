package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/distlock/locker"
)

// inspect shows the holder, token and owner of a held key and exits 0; a
// free key exits 3, as scripts test it.
func TestInspect_HeldAndFree(t *testing.T) {
	ctx := context.Background()
	url := "memory://lockctl-inspect"
	l, err := locker.Open(ctx, url, locker.WithOwner("deploy-42"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lease, err := l.TryAcquire(ctx, "deploys/prod")
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Release(ctx)

	a, stdout, stderr := testApp()
	if code := a.main(ctx, []string{"inspect", url, "deploys/prod"}); code != exitOK {
		t.Fatalf("inspect a held key exited %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"KEY", "deploys/prod", "held", "deploy-42"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}

	a, stdout, _ = testApp()
	if code := a.main(ctx, []string{"inspect", "--json", url, "deploys/staging"}); code != exitFree {
		t.Fatalf("inspect a free key exited %d, want %d", code, exitFree)
	}
	var got lockJSON
	if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil || got.Held || got.Key != "deploys/staging" {
		t.Fatalf("inspect --json of a free key = %q (%v)", stdout.String(), err)
	}
}

// list prints every held lock under a prefix, as a table or JSON.
func TestList_Prefix(t *testing.T) {
	ctx := context.Background()
	url := "memory://lockctl-list"
	l, err := locker.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, k := range []string{"jobs/a", "jobs/b", "other"} {
		lease, err := l.TryAcquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Release(ctx)
	}
	a, stdout, stderr := testApp()
	if code := a.main(ctx, []string{"list", "--json", url, "jobs/"}); code != exitOK {
		t.Fatalf("list exited %d: %s", code, stderr.String())
	}
	var got []lockJSON
	if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "jobs/a" || got[1].Key != "jobs/b" || got[0].Token == 0 {
		t.Fatalf("list --json jobs/ = %+v, want jobs/a and jobs/b with tokens", got)
	}
	a, stdout, _ = testApp()
	if code := a.main(ctx, []string{"list", url}); code != exitOK || strings.Count(stdout.String(), "held") != 3 {
		t.Fatalf("list exited %d with\n%s\nwant three held locks", code, stdout.String())
	}
}

// --watch redraws until lockctl is interrupted, then exits 0.
func TestInspect_WatchUntilInterrupted(t *testing.T) {
	sigs := make(chan os.Signal, 1)
	a, stdout, stderr := testApp()
	a.signals = sigs
	done := make(chan int)
	go func() {
		done <- a.main(context.Background(), []string{"inspect", "--watch", "memory://lockctl-watch", "k"})
	}()
	for !strings.Contains(stdout.String(), "free") {
		select {
		case code := <-done:
			t.Fatalf("watch exited %d before being interrupted: %s", code, stderr.String())
		default:
		}
	}
	sigs <- os.Interrupt
	if code := <-done; code != exitOK {
		t.Fatalf("watch exited %d after an interrupt, want 0", code)
	}
	if !strings.Contains(stdout.String(), "Every 1s: lockctl inspect") {
		t.Errorf("watch output lacks its header:\n%s", stdout.String())
	}
}
