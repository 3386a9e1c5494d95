package apiint

import (
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
