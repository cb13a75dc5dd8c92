package zookeeper_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/distlock/locker"
	"github.com/distlock/locker/zookeeper"
)

// Opening a Locker from a URL: the session timeout is the TTL of every lease.
func Example_openFromURL() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := locker.Open(ctx, "zookeeper://zk1:2181,zk2:2181,zk3:2181/locker?session_timeout=15s")
	if err != nil {
		log.Print(err)
		return
	}
	defer l.Close()
	err = locker.Do(ctx, l, "nightly-report", func(ctx context.Context, lease locker.Lease) error {
		fmt.Println("fencing token:", lease.Token()) // the own node's czxid
		return nil
	})
	if err != nil {
		log.Print(err)
	}
}

// New over a connection the caller made and keeps: it says which session
// timeout it asked for (the server must allow it: its min/maxSessionTimeout)
// and hands over the connection's events.
func ExampleNew() {
	conn, events, err := zk.Connect([]string{"zk1:2181", "zk2:2181", "zk3:2181"}, 15*time.Second)
	if err != nil {
		log.Print(err)
		return
	}
	defer conn.Close()
	l, err := zookeeper.New(conn,
		zookeeper.WithSessionTimeout(15*time.Second),
		zookeeper.WithEvents(events),
		zookeeper.WithRoot("/myapp/locks"))
	if err != nil {
		log.Print(err)
		return
	}
	defer l.Close()
}
