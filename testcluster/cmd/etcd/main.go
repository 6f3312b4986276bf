// Command etcd is etcd's own server, built from its Go module at the version
// pinned in ../../go.mod, so the test cluster needs no download but the Go
// module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
