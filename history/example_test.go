package history_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/distlock/locker"
	"github.com/distlock/locker/history"
	"github.com/distlock/locker/memory"
)

// A run against the in-process backend: clients over one Store contend for
// fresh keys, pause past their TTL, write through a fenced resource; the
// history is then checked. In a test, history.Check does the same and
// fails the test on a violation.
func ExampleRun() {
	store := memory.NewStore()
	newLocker := func(context.Context) (locker.Locker, error) { return memory.New(store) }
	res, err := history.Run(context.Background(), newLocker, history.Options{Duration: 300 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("violations:", len(res.Violations), "unknown checks:", len(res.UnknownKeys))
	// Output: violations: 0 unknown checks: 0
}
