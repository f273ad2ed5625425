// CoreDNS with only the plugins the real nodes' cluster DNS needs: the cluster domain answered from the
// API server (kubernetes), bound to the nodes' bridge address (bind), with errors, logging and a health
// endpoint. Built by scripts/k8s/nodes-up.sh; see docs/dev/k8s-control-plane.md (Real nodes).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	"github.com/coredns/coredns/coremain"
)

func init() {
	dnsserver.Directives = []string{"bind", "health", "errors", "log", "kubernetes"}
}

func main() { coremain.Run() }
