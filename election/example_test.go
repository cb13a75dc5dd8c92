package election_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/locker/election"
	"github.com/distlock/locker/fencing"
	"github.com/distlock/locker/memory"
)

// Three replicas of a service campaign for the election "report"; only the
// leader runs the periodic job, and every write it makes carries its
// term's token, so that the store refuses a deposed leader's late write.
// Here each replica shuts down after leading for two runs of the job, and
// the next one takes over.
func Example_replicas() {
	lockService := memory.NewStore() // stands for Redis, etcd, ZooKeeper or PostgreSQL
	reports := fencing.NewMemory()   // the fenced store the job writes to
	ctx := context.Background()

	var wg sync.WaitGroup
	for i := range 3 {
		l, err := memory.New(lockService)
		if err != nil {
			panic(err)
		}
		defer l.Close()
		e, err := election.New(l, "report", election.WithLabel(fmt.Sprintf("replica-%d", i)))
		if err != nil {
			panic(err)
		}
		replica, shutDown := context.WithCancel(ctx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Run campaigns, calls the job once this replica leads, and
			// campaigns again if the lead is lost, until the replica stops.
			_ = election.Run(replica, e, "", func(ctx context.Context, term *election.Term) error {
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for run := 1; ; run++ {
					select {
					case <-ctx.Done(): // the lead was lost, or the replica stops
						return nil
					case <-tick.C:
					}
					err := reports.Write(ctx, "daily", term.Token(), func() error {
						fmt.Printf("term %d: report #%d written\n", term.Token(), run)
						return nil
					})
					if err != nil {
						return err // fencing.ErrStaleToken: a newer leader wrote
					}
					if run == 2 {
						shutDown() // Run resigns: the next replica leads
						return nil
					}
				}
			})
		}()
	}
	wg.Wait()
	// Output:
	// term 1: report #1 written
	// term 1: report #2 written
	// term 2: report #1 written
	// term 2: report #2 written
	// term 3: report #1 written
	// term 3: report #2 written
}
