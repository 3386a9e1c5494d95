package apiint

import (
	"net/netip"
	"slices"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/records"
)

const pluginName = "apiint"

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

func parse(c *caddy.Controller) (*APIInt, error) {
	a := New()
	uses := 0
	for c.Next() {
		if uses++; uses > 1 {
			return nil, c.Err(plugin.ErrOnce.Error())
		}
		args := c.RemainingArgs()
		if len(args) == 0 {
			return nil, c.Errf("at least one API VIP address is required")
		}
		set, err := records.ParseSet(args)
		if err != nil {
			return nil, c.Err(err.Error())
		}
		a.apiInt = set
		a.api = set
		var once directive.Once // every option at most once
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
				a.Zones = []string{z}
			case "api":
				args := c.RemainingArgs()
				if len(args) == 0 {
					return nil, c.ArgErr()
				}
				set, err := records.ParseSet(args)
				if err != nil {
					return nil, c.Err(err.Error())
				}
				a.api = set
			case "ttl":
				t, err := directive.TTL(c)
				if err != nil {
					return nil, err
				}
				a.ttl = t
			case "fallthrough":
				a.Fall.SetZonesFromArgs(c.RemainingArgs())
			case "reverse":
				zones, err := reverseZones(c)
				if err != nil {
					return nil, err
				}
				a.reverseZones = zones
			default:
				return nil, c.Errf("unknown property '%s'", c.Val())
			}
		}
		if a.Zones == nil {
			zs, err := directive.DefaultZones(c, pluginName)
			if err != nil {
				return nil, err
			}
			a.Zones = zs
		}
	}
	a.build()
	return a, nil
}

// reverseZones parses the CIDRs of the reverse option into the reverse zones
// that hold them: in-addr.arpa. for IPv4, ip6.arpa. for IPv6, a CIDR off an
// octet (or nibble) boundary split into the zones that cover it exactly.
func reverseZones(c *caddy.Controller) ([]string, error) {
	args := c.RemainingArgs()
	if len(args) == 0 {
		return nil, c.ArgErr()
	}
	var zones []string
	for _, arg := range args {
		p, err := netip.ParsePrefix(arg)
		if err != nil {
			return nil, c.Errf("reverse: %q is not a CIDR (like 192.0.2.0/24 or 2001:db8::/32)", arg)
		}
		if p != p.Masked() {
			return nil, c.Errf("reverse: %q has host bits set: the network is %s", arg, p.Masked())
		}
		if p.Addr().Is4In6() {
			return nil, c.Errf("reverse: %q is an IPv4-mapped IPv6 prefix: write it as IPv4", arg)
		}
		for _, z := range plugin.Host(p.String()).NormalizeExact() {
			if !slices.Contains(zones, z) {
				zones = append(zones, z)
			}
		}
	}
	return zones, nil
}
