package sqlguard_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"

	"github.com/distlock/locker"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/fencing/sqlguard"
	_ "github.com/distlock/locker/memory" // registers memory://
)

// Write checks the lease's token and applies the write in one transaction:
// a holder whose lease ran out while it was paused cannot overwrite what a
// newer holder wrote.
func ExampleGuard_Write() {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:accounts?mode=memory&cache=shared")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE accounts (id INTEGER PRIMARY KEY, balance INTEGER); INSERT INTO accounts VALUES (42, 100)"); err != nil {
		log.Fatal(err)
	}
	guard, err := sqlguard.New(db) // SQLite, detected from the driver
	if err != nil {
		log.Fatal(err)
	}
	withdraw := func(lease locker.Lease, amount int) error {
		return guard.Write(ctx, "account/42", lease.Token(), func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = balance - ? WHERE id = 42", amount)
			return err
		})
	}

	l, err := locker.Open(ctx, "memory://example-sqlguard")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	old, _ := l.TryAcquire(ctx, "account/42")
	_ = old.Release(ctx) // as if its lease had run out while old was paused
	cur, _ := l.TryAcquire(ctx, "account/42")
	defer cur.Release(ctx)

	fmt.Println("current holder:", withdraw(cur, 30))
	err = withdraw(old, 30) // the paused holder wakes up
	fmt.Println("stale holder refused:", errors.Is(err, fencing.ErrStaleToken))
	var balance int
	_ = db.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 42").Scan(&balance)
	fmt.Println("balance:", balance)
	// Output:
	// current holder: <nil>
	// stale holder refused: true
	// balance: 70
}
