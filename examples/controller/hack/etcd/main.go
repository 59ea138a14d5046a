// Command etcd is etcd's server (go.etcd.io/etcd/server/v3, the version in
// go.mod) as its own main package builds it, for examples/controller's tests
// and scale harness: a module of its own so that hack/build-etcd.sh can build
// it through the Go module proxy. Debian's etcd-server is 3.4, which lacks
// the watch progress requests that the API server's streaming lists
// (WatchList, which client-go's informers use by default) need; with it, every
// informer falls back to a full LIST.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
