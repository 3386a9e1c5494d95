// Package bind is CoreDNS's bind with the same syntax, for addresses that
// come and go while the server runs: a VIP that keepalived adds to the
// interface, an IPv6 address still in duplicate address detection at boot.
// CoreDNS's own bind takes an interface's addresses once, at start: a VIP
// added later is never answered on, and a tentative link-local address makes
// the server exit ("bind: cannot assign requested address").
package bind

import (
	"fmt"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"
)

const pluginName = "bind"

func init() { plugin.Register(pluginName, setup) }

// startWait bounds how long a server block waits at start for one of its
// addresses to become bindable (IPv6 DAD takes about a second).
const startWait = 10 * time.Second

func setup(c *caddy.Controller) error {
	dirs, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	cfg := dnsserver.GetConfig(c)
	var now []string
	for deadline := time.Now().Add(startWait); ; time.Sleep(100 * time.Millisecond) {
		ifaces, err := interfaces()
		if err != nil {
			return plugin.Error(pluginName, err)
		}
		hosts, err := Hosts(dirs, ifaces)
		if err != nil {
			return plugin.Error(pluginName, err)
		}
		// An empty list would make CoreDNS listen on every address.
		if now = bindable(hosts); len(now) > 0 {
			break
		}
		if time.Now().After(deadline) {
			return plugin.Error(pluginName, fmt.Errorf("none of %v can be bound after %v", hosts, startWait))
		}
	}
	cfg.ListenHosts = now
	l := newLive(dirs, cfg.Port, now)
	prev := cfg.UDPDecorateWriterFunc
	l.decorate = prev
	cfg.UDPDecorateWriterFunc = func(s *dnsserver.Server) dns.DecorateWriter {
		l.capture(s)
		if prev != nil {
			return prev(s)
		}
		return nil
	}
	c.OnStartup(l.start)
	c.OnShutdown(l.shutdown)
	return nil
}

func parse(c *caddy.Controller) ([]Directive, error) {
	var dirs []Directive
	for c.Next() {
		d := Directive{Args: c.RemainingArgs()}
		if len(d.Args) == 0 {
			return nil, c.Err("at least one address or interface name is expected")
		}
		for c.NextBlock() {
			switch c.Val() {
			case "except":
				if d.Except = c.RemainingArgs(); len(d.Except) == 0 {
					return nil, c.Err("at least one address or interface must be given to except")
				}
			default:
				return nil, c.Errf("invalid option %q", c.Val())
			}
		}
		dirs = append(dirs, d)
	}
	return dirs, nil
}
