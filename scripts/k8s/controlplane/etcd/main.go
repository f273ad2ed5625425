// Command etcd is the upstream etcd server (go.etcd.io/etcd/server/v3's etcdmain), built
// from the Go module proxy because no etcd release binary can be downloaded here.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
