// Command coredns is CoreDNS built with the stock plugins a cluster node's
// resolver needs and the infradns plugins.
package main

import (
	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The stock plugins; keep this list and the README's in step.
	_ "github.com/coredns/coredns/plugin/acl"
	_ "github.com/coredns/coredns/plugin/any"
	_ "github.com/coredns/coredns/plugin/bufsize"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/cancel"
	_ "github.com/coredns/coredns/plugin/debug"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/file"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/header"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metadata"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/minimal"
	_ "github.com/coredns/coredns/plugin/multisocket"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/root"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/whoami"

	_ "github.com/infradns/infradns/plugin/apiint"
	_ "github.com/infradns/infradns/plugin/appswildcard"
	// CoreDNS's bind, same syntax, for addresses added while it runs.
	_ "github.com/infradns/infradns/plugin/bind"
	_ "github.com/infradns/infradns/plugin/lbconfig"
	_ "github.com/infradns/infradns/plugin/lbpools"
	_ "github.com/infradns/infradns/plugin/lbservices"
	_ "github.com/infradns/infradns/plugin/mdnsnodes"

	"github.com/miekg/dns"
)

// version is set by the Makefile from git describe.
var version = "dev"

func init() {
	d, err := withInfradns(dnsserver.Directives)
	if err != nil {
		panic(err) // a CoreDNS upgrade renamed an anchor: refuse to start with a wrong order
	}
	if d, err = withCompanions(d); err != nil {
		panic(err) // the same, for the non-DNS plugins' anchor
	}
	dnsserver.Directives = d
	dns.DefaultMsgAcceptFunc = acceptMsg
	caddy.AppName = "infradns"
	caddy.AppVersion = version + " (CoreDNS " + coremain.CoreVersion + ")"
}

func main() { coremain.Run() }
