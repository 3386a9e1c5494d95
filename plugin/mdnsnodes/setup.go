package mdnsnodes

import (
	"net/netip"
	"os"
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/mdns"

	"github.com/miekg/dns"
)

const pluginName = "mdnsnodes"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	m, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	c.OnStartup(func() error {
		cfg := dnsserver.GetConfig(c)
		m.Link(cfg, m)
		m.vips = siblingVIPs(cfg.Handlers())
		m.reserved = withSiblingLabels(m.reserved, cfg.Handlers())
		if err := m.Start(); err != nil {
			return plugin.Error(pluginName, err)
		}
		return nil
	})
	c.OnShutdown(func() error {
		m.Stop()
		return nil
	})
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		m.Next = next
		return m
	})
	return nil
}

func parse(c *caddy.Controller) (*MDNSNodes, error) {
	m := New()
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
				m.Zones = []string{z}
			case "cluster":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				if strings.ContainsAny(args[0], " =") || len(args[0]) > 63 {
					return nil, c.Errf("invalid cluster name %q", args[0])
				}
				m.cluster = args[0]
			case "interface":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				m.iface = args[0]
			case "bind":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				a, err := netip.ParseAddr(args[0])
				if err != nil || a.IsUnspecified() || a.IsMulticast() {
					return nil, c.Errf("invalid bind address %q", args[0])
				}
				m.bind = a
			case "service":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				if !validServiceType(args[0]) {
					return nil, c.Errf("invalid service type %q: want _name._tcp or _name._udp", args[0])
				}
				m.service = strings.ToLower(args[0])
			case "key":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				if _, err := os.Stat(args[0]); err != nil {
					return nil, c.Errf("key file: %v", err)
				}
				m.keyFile = args[0]
			case "ttl":
				t, err := directive.TTL(c)
				if err != nil {
					return nil, err
				}
				m.ttl = t
			case "kubeconfig":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				m.kubeconfig = args[0]
			case "nodes-service":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return nil, c.ArgErr()
				}
				if err := cluster.CheckNamespacedName(args[0]); err != nil {
					return nil, c.Errf("nodes-service: %v", err)
				}
				m.namesService = args[0]
			case "fallthrough":
				m.Fall.SetZonesFromArgs(c.RemainingArgs())
			default:
				return nil, c.Errf("unknown property '%s'", c.Val())
			}
		}
		if m.iface != "" && m.bind.IsValid() {
			return nil, c.Err("use either 'interface' or 'bind', not both")
		}
		if m.namesService != "" && m.kubeconfig == "" {
			return nil, c.Err("nodes-service needs kubeconfig: it names a Service of the API")
		}
		if m.iface == "" && !m.bind.IsValid() && m.kubeconfig == "" {
			return nil, c.Err("one of 'interface NAME' or 'bind ADDRESS' is required: the link to listen on (or 'kubeconfig PATH' for the Nodes of the API alone)")
		}
		if m.Zones == nil {
			zs, err := directive.DefaultZones(c, pluginName)
			if err != nil {
				return nil, err
			}
			m.Zones = zs
		}
	}
	m.build()
	return m, nil
}

// validServiceType accepts DNS-SD service types: "_name._tcp" or "_name._udp"
// (RFC 6763 7).
func validServiceType(s string) bool {
	name, proto, ok := strings.Cut(strings.ToLower(s), ".")
	if !ok || (proto != "_tcp" && proto != "_udp") || len(name) < 2 || len(name) > 16 || name[0] != '_' {
		return false
	}
	_, ok = dns.IsDomainName(s)
	return ok && mdns.ValidHostLabel(name[1:])
}
