package postgres_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/distlock/locker"
	"github.com/distlock/locker/postgres"
)

// Open a Locker from a URL: the libpq URL plus this package's parameters.
func Example_openFromURL() {
	ctx := context.Background()
	l, err := locker.Open(ctx, "postgres://app@localhost:5432/app?table=locks&schema=infra&max_conns=32&ttl=30s")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	err = locker.Do(ctx, l, "nightly-report", func(ctx context.Context, lease locker.Lease) error {
		fmt.Println("running with token", lease.Token())
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Fence a write with the SQL guard: the token is admitted and the write
// made in one transaction, or neither.
func ExampleGuard_Write() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	l, err := postgres.New(pool, locker.WithTTL(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	guard, err := postgres.NewGuard(pool)
	if err != nil {
		log.Fatal(err)
	}
	lease, err := l.Acquire(ctx, "invoice/42")
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// Refused with fencing.ErrStaleToken, writing nothing, if a newer holder
	// wrote first.
	err = guard.Write(ctx, "invoice/42", lease.Token(), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE invoices SET paid = true WHERE id = 42")
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}
