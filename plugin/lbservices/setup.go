package lbservices

import (
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/infradns/infradns/internal/authority"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/dnsname"

	"github.com/miekg/dns"
)

const pluginName = "lbservices"

// defaultLabel puts the names at SERVICE.NAMESPACE.lb.<cluster domain>.
const defaultLabel = cluster.ServiceNamesLabel

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	l, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	c.OnStartup(func() error {
		l.Link(dnsserver.GetConfig(c), l)
		l.Start()
		return nil
	})
	c.OnShutdown(func() error {
		l.Stop()
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		l.Next = next
		return l
	})
	return nil
}

func parse(c *caddy.Controller) (*LBServices, error) {
	l := &LBServices{label: defaultLabel, ttl: directive.DefaultTTL}
	uses := 0
	for c.Next() {
		if uses++; uses > 1 {
			return nil, c.Err(plugin.ErrOnce.Error())
		}
		if len(c.RemainingArgs()) != 0 {
			return nil, c.ArgErr()
		}
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
				l.Zones = []string{z}
			case "label":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				if err := dnsname.CheckLabels(args[0]); err != nil {
					return nil, c.Errf("invalid label %q: %v; want one or more host-name labels without '*', e.g. lb", args[0], err)
				}
				l.label = strings.ToLower(args[0])
			case "kubeconfig":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				l.kubeconfig = args[0]
			case "ttl":
				t, err := directive.TTL(c)
				if err != nil {
					return nil, err
				}
				l.ttl = t
			case "fallthrough":
				l.Fall.SetZonesFromArgs(c.RemainingArgs())
			default:
				return nil, c.Errf("unknown property '%s'", c.Val())
			}
		}
		if l.kubeconfig == "" {
			return nil, c.Err("the 'kubeconfig FILE' option is required: the names come from the Services of the Kubernetes API")
		}
		if l.Zones == nil {
			z, err := directive.DefaultZones(c, pluginName)
			if err != nil {
				return nil, err
			}
			l.Zones = z
		}
	}
	for _, z := range l.Zones {
		l.domains = append(l.domains, dns.Fqdn(l.label)+z)
	}
	l.Authority = authority.New(l.Zones, l.ttl, l.Fall)
	return l, nil
}

// firstLabel is the label of a (possibly dotted) label option right below the zone.
func firstLabel(label string) string {
	if i := strings.LastIndexByte(label, '.'); i >= 0 {
		return label[i+1:]
	}
	return label
}
