package appswildcard

import (
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/dnsname"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
)

const pluginName = "appswildcard"

// defaultLabel is OpenShift's default ingress domain label: *.apps.<cluster domain>.
const defaultLabel = "apps"

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	a, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	c.OnStartup(func() error {
		a.Link(dnsserver.GetConfig(c), a)
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		a.Next = next
		return a
	})
	return nil
}

// parse reads every appswildcard directive of the server block: each one adds a
// wildcard domain (a second IngressController, an appsDomain) with its own VIPs.
func parse(c *caddy.Controller) (*AppsWildcard, error) {
	a := New()
	defined := map[string]int{} // wildcard domain → line of its directive
	for c.Next() {
		line := c.Line()
		args := c.RemainingArgs()
		if len(args) == 0 {
			return nil, c.Errf("at least one ingress VIP address is required")
		}
		set, err := records.ParseSet(args)
		if err != nil {
			return nil, c.Err(err.Error())
		}
		w := Wildcard{Addrs: set, TTL: directive.DefaultTTL}
		label := defaultLabel
		var zones []string
		var once directive.Once // every option at most once per directive
		for c.NextBlock() {
			if err := once.Use(c); err != nil {
				return nil, err
			}
			switch c.Val() {
			case "zone":
				z, err := directive.Zone(c)
				if err != nil {
					return nil, err
				}
				zones = []string{z}
			case "label":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				if err := dnsname.CheckLabels(args[0]); err != nil {
					return nil, c.Errf("invalid label %q: %v; want one or more host-name labels without '*', e.g. apps", args[0], err)
				}
				label = args[0]
			case "ttl":
				t, err := directive.TTL(c)
				if err != nil {
					return nil, err
				}
				w.TTL = t
			case "fallthrough":
				a.Fall.SetZonesFromArgs(c.RemainingArgs())
			default:
				return nil, c.Errf("unknown property '%s'", c.Val())
			}
		}
		if zones == nil {
			if zones, err = directive.DefaultZones(c, pluginName); err != nil {
				return nil, err
			}
		}
		for _, z := range zones {
			ww := w
			ww.Zone = z
			ww.Domain = dns.Fqdn(strings.ToLower(label)) + z
			if prev, ok := defined[ww.Domain]; ok {
				return nil, c.Errf("wildcard *.%s is already defined on line %d", ww.Domain, prev)
			}
			defined[ww.Domain] = line
			a.wildcards = append(a.wildcards, ww)
		}
	}
	a.build()
	return a, nil
}
