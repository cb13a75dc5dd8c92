package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/driver"
)

// TestPublish_SessionShowsAnotherToken_ErrLeaseLost: Publish is decided by
// the server — the lock row held by the session that shows the lock's
// token — not by the client's belief that its connection still holds it.
func TestPublish_SessionShowsAnotherToken_ErrLeaseLost(t *testing.T) {
	b, _ := newTestBackendN(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dl, err := b.TryAcquire(ctx, &driver.Request{Key: "k", TTL: 10 * time.Second, Value: "v1", Lost: func(error) {}})
	if err != nil {
		t.Fatal(err)
	}
	l := dl.(*lock)
	// The same pinned connection, believed to hold a lock of another grant.
	impostor := &lock{b: b, conn: l.conn, token: l.token + 1, key: l.key, owner: driver.NewOwnerID()}
	if err := b.Publish(ctx, impostor, "v2"); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Publish for a token the holder's session does not show = %v, want ErrLeaseLost", err)
	}
	if err := b.Publish(ctx, l, "v3"); err != nil {
		t.Fatalf("Publish by the holder: %v", err)
	}
	info, err := b.Inspect(ctx, "k")
	if err != nil || info.Value != "v3" || info.Token != l.token {
		t.Fatalf("Inspect = %+v, %v; want value v3, token %d", info, err, l.token)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Publish(ctx, l, "v4"); !errors.Is(err, locker.ErrLeaseLost) {
		t.Fatalf("Publish after Release = %v, want ErrLeaseLost", err)
	}
}
