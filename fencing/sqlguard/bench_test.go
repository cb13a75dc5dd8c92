package sqlguard_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/distlock/locker/fencing/sqlguard"
)

// BenchmarkGuard: the cost of one admission in a statement of its own
// (Admit) and in a transaction with an empty write (Write: BEGIN, the
// upsert, COMMIT), on each engine, one writer.
func BenchmarkGuard(b *testing.B) {
	for _, e := range engines() {
		b.Run(e.name, func(b *testing.B) {
			db := e.open(b)
			g, err := sqlguard.New(db)
			if err != nil {
				b.Fatal(err)
			}
			ctx := ctxT(b, 10*time.Minute)
			token := uint64(0)
			b.Run("Admit", func(b *testing.B) {
				for b.Loop() {
					token++
					if err := g.Admit(ctx, "r", token); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("Write", func(b *testing.B) {
				for b.Loop() {
					token++
					if err := g.Write(ctx, "r", token, func(*sql.Tx) error { return nil }); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
