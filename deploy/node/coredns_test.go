package node_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/forward"
)

// corefile is a Corefile held in memory.
type corefile string

func (c corefile) Body() []byte       { return []byte(c) }
func (c corefile) Path() string       { return "Corefile" }
func (c corefile) ServerType() string { return "dns" }

func init() { dnsserver.Quiet = true }

// coreDNSLoads starts a real CoreDNS server (in this process, on a free
// loopback port) whose server block imports forwardConf the way the node's
// Corefile does, so a forward.conf that CoreDNS would refuse fails the test
// rather than a node's resolver at its next reload.
func coreDNSLoads(t *testing.T, forwardConf string) {
	t.Helper()
	inst, err := caddy.Start(corefile(".:0 {\n    bind 127.0.0.1\n    import " + forwardConf + "\n}\n"))
	if err != nil {
		t.Errorf("CoreDNS refuses the forward.conf written: %v", err)
		return
	}
	inst.Stop()
}

// resolversRead fails for a nameserver line of resolv.conf that a resolver
// would skip: Go's resolver keeps only what netip.ParseAddr reads, which,
// like glibc's parser, takes a zone on an IPv6 address only
// (192.0.2.53%ens3 is dropped, silently, and with it an upstream).
func resolversRead(t *testing.T, resolvConf string) {
	t.Helper()
	for _, line := range strings.Split(resolvConf, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		if _, err := netip.ParseAddr(f[1]); err != nil {
			t.Errorf("resolv.conf: %q: a resolver skips it: %v", line, err)
		}
	}
}
