package lbconfig

import (
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/records"

	"k8s.io/apimachinery/pkg/util/validation"
)

const pluginName = "lbconfig"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	l, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	c.OnStartup(func() error {
		if err := l.Start(); err != nil {
			return plugin.Error(pluginName, err)
		}
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

func parse(c *caddy.Controller) (*LBConfig, error) {
	l := New()
	uses := 0
	for c.Next() {
		if uses++; uses > 1 {
			return nil, c.Err(plugin.ErrOnce.Error())
		}
		if len(c.RemainingArgs()) != 0 {
			return nil, c.ArgErr()
		}
		for c.NextBlock() {
			if err := parseOption(c, l); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case l.cfg.Cluster == "":
		return nil, c.Err("the 'cluster NAME' option is required")
	case len(l.cfg.APIVIPs) == 0:
		return nil, c.Err("the 'api-vip ADDRESS...' option is required")
	case l.outputs[lb.Keepalived].path == "" && l.outputs[lb.HAProxyCfg].path == "":
		return nil, c.Err("at least one of 'keepalived OUTPUT' and 'haproxy OUTPUT' is required")
	case l.cfg.LBPort == l.cfg.HealthPort:
		return nil, c.Errf("lb-port and health-port are both %d", l.cfg.LBPort)
	}
	if err := lb.CheckTiming(l.cfg.VRRPVersion, l.cfg.AdvertInterval); err != nil {
		return nil, c.Err(err.Error())
	}
	if l.cfg.RouterIDs.API != 0 && l.cfg.RouterIDs.API == l.cfg.RouterIDs.Ingress {
		return nil, c.Errf("router-ids: api and ingress are both %d", l.cfg.RouterIDs.API)
	}
	return l, nil
}

func parseOption(c *caddy.Controller, l *LBConfig) error {
	opt := c.Val()
	args := c.RemainingArgs()
	one := func() (string, error) {
		if len(args) != 1 {
			return "", c.ArgErr()
		}
		return args[0], nil
	}
	switch opt {
	case "kubeconfig":
		v, err := one()
		l.kubeconfig = v
		return err
	case "cluster":
		v, err := one()
		if err != nil {
			return err
		}
		if err := lb.CheckClusterName(v); err != nil {
			return c.Errf("invalid cluster name: %v", err)
		}
		l.cfg.Cluster = v
	case "node":
		v, err := one()
		l.cfg.NodeName = v
		return err
	case "api-vip", "ingress-vip":
		vips, err := parseVIPs(c, args)
		if err != nil {
			return err
		}
		if opt == "api-vip" {
			l.cfg.APIVIPs = vips
		} else {
			l.cfg.IngressVIPs = vips
		}
	case "interface":
		v, err := one()
		if err != nil {
			return err
		}
		if v != "auto" && (len(v) > 15 || strings.ContainsAny(v, " /\"{}")) {
			return c.Errf("invalid interface name %q", v)
		}
		l.cfg.Interface = v
	case "node-ip":
		if len(args) == 1 && args[0] == "auto" {
			l.cfg.NodeIPs = nil
			return nil
		}
		ips, err := parseAddrs(c, args)
		if err != nil {
			return err
		}
		l.cfg.NodeIPs = ips
	case "api-port", "lb-port", "health-port":
		v, err := one()
		if err != nil {
			return err
		}
		p, err := strconv.ParseUint(v, 10, 16)
		if err != nil || p == 0 {
			return c.Errf("%s must be a port in [1, 65535]: %q", opt, v)
		}
		switch opt {
		case "api-port":
			l.cfg.APIPort = uint16(p)
		case "lb-port":
			l.cfg.LBPort = uint16(p)
		default:
			l.cfg.HealthPort = uint16(p)
		}
	case "keepalived", "haproxy":
		if len(args) < 1 || len(args) > 2 {
			return c.ArgErr()
		}
		o := output{path: args[0]}
		if len(args) == 2 {
			o.template = args[1]
		}
		l.outputs[kindOf(opt)] = o
	case "reload":
		if len(args) < 2 || (args[0] != "keepalived" && args[0] != "haproxy") {
			return c.Errf("reload needs keepalived|haproxy and a method: pidfile PATH, socket PATH, none or COMMAND...")
		}
		r, err := parseReload(c, args[0], args[1:])
		if err != nil {
			return err
		}
		l.reload[kindOf(args[0])] = r
	case "health-check":
		if len(args) != 2 || (args[0] != "api" && args[0] != "ingress") {
			return c.Errf("health-check needs api|ingress and URL|none")
		}
		if args[1] != "none" && !strings.HasPrefix(args[1], "http://") && !strings.HasPrefix(args[1], "https://") {
			return c.Errf("health-check %s: %q is not an http(s) URL", args[0], args[1])
		}
		l.health[args[0]] = args[1]
	case "vrrp-guard":
		v, err := one()
		if err != nil {
			return err
		}
		if v == "off" {
			l.guardWindow = 0
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Minute {
			return c.Errf("vrrp-guard must be a duration in (0, 1m] or off: %q", v)
		}
		l.guardWindow = d
	case "status-lease":
		v, err := one()
		if err != nil {
			return err
		}
		if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
			return c.Errf("status-lease needs a namespace name: %q: %s", v, strings.Join(errs, "; "))
		}
		l.statusNS = v
	case "unicast":
		if len(args) != 0 {
			return c.ArgErr()
		}
		l.cfg.Unicast = true
	case "ingress-service":
		v, err := one()
		if err != nil {
			return err
		}
		ns, name, ok := strings.Cut(v, "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return c.Errf("ingress-service must be NAMESPACE/NAME: %q", v)
		}
		l.ingressNS, l.ingressName = ns, name
	case "backends":
		if len(args) == 0 {
			return c.ArgErr()
		}
		var bs []netip.AddrPort
		for _, a := range args {
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				ip, err2 := netip.ParseAddr(a)
				if err2 != nil {
					return c.Errf("invalid backend %q: want ADDRESS or ADDRESS:PORT", a)
				}
				ap = netip.AddrPortFrom(ip, 0) // api-port
			}
			bs = append(bs, ap)
		}
		l.cfg.StaticBackends = bs
	case "vrrp-version":
		v, err := one()
		if err != nil {
			return err
		}
		switch v {
		case "2":
			l.cfg.VRRPVersion = 2
		case "3":
			l.cfg.VRRPVersion = 3
		default:
			return c.Errf("vrrp-version must be 2 or 3: %q", v)
		}
	case "advert-interval":
		v, err := one()
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return c.Errf("invalid advert-interval %q: %v", v, err)
		}
		l.cfg.AdvertInterval = d
	case "router-ids":
		if len(args) != 2 {
			return c.ArgErr()
		}
		for i, a := range args {
			n, err := strconv.ParseUint(a, 10, 8)
			if err != nil || n > 255 {
				return c.Errf("router-ids must be in [0, 255] (0: computed from the cluster name): %q", a)
			}
			if i == 0 {
				l.cfg.RouterIDs.API = uint8(n)
			} else {
				l.cfg.RouterIDs.Ingress = uint8(n)
			}
		}
	case "track-dir":
		v, err := one()
		if err != nil {
			return err
		}
		if !strings.HasPrefix(v, "/") {
			return c.Errf("track-dir must be an absolute path: %q", v)
		}
		l.cfg.TrackDir = v
	default:
		return c.Errf("unknown property '%s'", opt)
	}
	return nil
}

func parseVIPs(c *caddy.Controller, args []string) ([]netip.Addr, error) {
	vips, err := parseAddrs(c, args)
	if err != nil {
		return nil, err
	}
	if len(vips) > 2 || (len(vips) == 2 && vips[0].Is4() == vips[1].Is4()) {
		return nil, c.Errf("%s takes one address per family: %v", c.Val(), args)
	}
	return vips, nil
}

// parseAddrs shares the address rules of the DNS plugins (records.ParseSet:
// unicast, no zone, no duplicates).
func parseAddrs(c *caddy.Controller, args []string) ([]netip.Addr, error) {
	if len(args) == 0 {
		return nil, c.ArgErr()
	}
	set, err := records.ParseSet(args)
	if err != nil {
		return nil, c.Err(err.Error())
	}
	var out []netip.Addr
	for _, ip := range append(set.V4, set.V6...) {
		a, _ := netip.AddrFromSlice(ip)
		out = append(out, a.Unmap())
	}
	return out, nil
}

func parseReload(c *caddy.Controller, what string, args []string) (reloadSpec, error) {
	switch args[0] {
	case "pidfile", "socket":
		if len(args) != 2 || !strings.HasPrefix(args[1], "/") {
			return reloadSpec{}, c.Errf("reload %s %s needs one absolute PATH", what, args[0])
		}
		if args[0] == "socket" && what != "haproxy" {
			return reloadSpec{}, c.Errf("reload %s socket: only haproxy has a master socket", what)
		}
		return reloadSpec{method: args[0], path: args[1]}, nil
	case "none":
		if len(args) != 1 {
			return reloadSpec{}, c.ArgErr()
		}
		return reloadSpec{method: "none"}, nil
	}
	return reloadSpec{method: "command", argv: args}, nil
}

func kindOf(s string) lb.Kind {
	if s == "keepalived" {
		return lb.Keepalived
	}
	return lb.HAProxyCfg
}
