// Command etcdserver is the etcd 3.6 server, built from the Go module proxy
// for the test image locker-test-etcd.
//
// Debian bookworm ships etcd 3.4.23, while users run 3.5 and 3.6; building
// the server here gives tests a current etcd without any registry. It lives
// in its own module so that the library's go.mod never requires the etcd
// server and its large dependency tree. The etcd server module cannot be
// `go install`ed directly (its go.mod has replace directives), hence this
// three-line main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
