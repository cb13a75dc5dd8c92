package main

// The backends lockctl can reach by URL. Each registers its scheme with
// locker.Register in init; a scheme missing here is reported by locker.Open
// as unknown ("forgotten import?").
import (
	_ "github.com/distlock/locker/etcd"
	_ "github.com/distlock/locker/memory"
	_ "github.com/distlock/locker/postgres"
	_ "github.com/distlock/locker/redis"
	_ "github.com/distlock/locker/zookeeper"
)
