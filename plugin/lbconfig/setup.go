package lbconfig

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/directive"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/records"
)

const pluginName = "lbconfig"

var log = clog.NewWithPlugin(pluginName)

func init() { plugin.Register(pluginName, setup) }

func setup(c *caddy.Controller) error {
	l, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	// It acts only once caddy adopts this instance, and a failed reload's
	// instance is stopped, though caddy runs no OnShutdown for it
	// (lifecycle.go).
	l.inCaddy = true
	c.Set(instanceKey{}, l)
	registerAdoptHook()
	c.OnStartup(func() error {
		if err := l.Start(); err != nil {
			return plugin.Error(pluginName, err)
		}
		return nil
	})
	c.OnRestartFailed(func() error {
		discardNewer(l)
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

// optionOf is the Corefile option of each cluster model key: an error
// about a key points at the option's line, in the option's words.
var optionOf = map[string]string{
	cluster.KeyCluster:        "cluster",
	cluster.KeyAPIVIPs:        "api-vip",
	cluster.KeyIngressVIPs:    "ingress-vip",
	cluster.KeyRouterIDs:      "router-ids",
	cluster.KeyAPIPort:        "api-port",
	cluster.KeyLBPort:         "lb-port",
	cluster.KeyHealthPort:     "health-port",
	cluster.KeyAPIServers:     "backends",
	cluster.KeyVRRPVersion:    "vrrp-version",
	cluster.KeyAdvertInterval: "advert-interval",
	cluster.KeyFailover:       "failover",
	cluster.KeyUnicast:        "unicast",
	cluster.KeyTrackDir:       "track-dir",
	cluster.KeyIngressService: "ingress-service",
	cluster.KeyHealth:         "health-check",
	cluster.KeyNode:           "node",
	cluster.KeyInterface:      "interface",
	cluster.KeyNodeIPs:        "node-ip",
	cluster.KeyVIPMode:        "vip-mode",
	cluster.KeyBGPASN:         "bgp-asn",
	cluster.KeyBGPRouterID:    "bgp-router-id",
	cluster.KeyBGPSpeaker:     "bgp-speaker",
	cluster.KeyBGPTable:       "bgp-speaker",
	cluster.KeyBGPPeers:       "bgp-peer",
}

// usedIn is the instance storage key that remembers the server block
// lbconfig was set up in: one per Corefile, since two would write and
// reload the same keepalived and haproxy.
type usedIn struct{}

type blockPos struct {
	index int
	file  string
	line  int
}

// parsing is one lbconfig block being read: the Spec it fills and where
// each option was given (reload and health-check once per kind), for
// errors found after the block.
type parsing struct {
	c    *caddy.Controller
	l    *LBConfig
	spec cluster.Spec
	once directive.Once
	line int // the directive's own line
	// peerLine is the line of the last bgp-peer (each is used once per
	// address, so once has them under "bgp-peer ADDRESS").
	peerLine int
}

// lineOf is the line an option was given on (0: not given).
func (p *parsing) lineOf(opt string) int {
	if opt == "bgp-peer" {
		return p.peerLine
	}
	return p.once.Line(opt)
}

func parse(c *caddy.Controller) (*LBConfig, error) {
	p := &parsing{c: c, l: New()}
	uses := 0
	for c.Next() {
		if uses++; uses > 1 {
			return nil, c.Errf("%s: used more than once in this server block (first on line %d)", pluginName, p.line)
		}
		p.line = c.Line()
		if prev, ok := c.Get(usedIn{}).(blockPos); ok && prev.index != c.ServerBlockIndex {
			return nil, c.Errf("%s: already used in another server block (%s:%d); one lbconfig per Corefile, as the files it writes are per node", pluginName, prev.file, prev.line)
		}
		c.Set(usedIn{}, blockPos{index: c.ServerBlockIndex, file: c.File(), line: c.Line()})
		if len(c.RemainingArgs()) != 0 {
			return nil, c.ArgErr()
		}
		for c.NextBlock() {
			if err := p.option(); err != nil {
				return nil, err
			}
		}
	}
	return p.finish()
}

// finish runs the checks that span options, then the cluster model's.
func (p *parsing) finish() (*LBConfig, error) {
	l, s := p.l, p.spec
	switch {
	case s.Name == "":
		return nil, p.errAt(p.line, "the 'cluster NAME' option is required")
	case len(s.APIVIPs) == 0:
		return nil, p.errAt(p.line, "the 'api-vip ADDRESS...' option is required")
	case s.Mode == cluster.ModeBGP && l.outputs[lb.Keepalived].path != "":
		return nil, p.errAt(p.once.Line("keepalived"), "vip-mode bgp announces the VIPs over BGP; keepalived would hold them with VRRP: a VIP is one or the other (drop 'keepalived' or 'vip-mode bgp')")
	case s.Mode != cluster.ModeBGP && l.outputs[lb.Keepalived].path == "" && l.outputs[lb.HAProxyCfg].path == "":
		return nil, p.errAt(p.line, "at least one of 'keepalived OUTPUT' and 'haproxy OUTPUT' is required")
	}
	if s.Mode != cluster.ModeBGP {
		for _, o := range []string{"bgp-asn", "bgp-router-id", "bgp-speaker", "bgp-peer"} {
			if line := p.lineOf(o); line != 0 {
				return nil, p.errAt(line, "%s is a setting of vip-mode bgp, and this block has no 'vip-mode bgp'", o)
			}
		}
	}
	ka, ha := l.outputs[lb.Keepalived], l.outputs[lb.HAProxyCfg]
	if ka.path != "" && ka.path == ha.path {
		return nil, p.errAt(p.once.Line("haproxy"), "keepalived and haproxy both write %s", ka.path)
	}
	if l.reload[lb.Keepalived].method == "pidfile" && l.reload[lb.Keepalived].path == l.reload[lb.HAProxyCfg].path {
		return nil, p.errAt(p.once.Line("reload haproxy"), "keepalived and haproxy are both reloaded through %s", l.reload[lb.Keepalived].path)
	}
	m, err := cluster.New(s)
	if err != nil {
		var e *cluster.Error
		if !errors.As(err, &e) {
			return nil, p.errAt(p.line, "%v", err)
		}
		opts := make([]string, len(e.Keys))
		for i, k := range e.Keys {
			opts[i] = optionOf[k]
		}
		// Point at the option given last of those at fault: the one that
		// broke a rule the others had kept.
		line := 0
		for _, o := range opts {
			line = max(line, p.lineOf(o))
		}
		if line == 0 { // defaults broke the rule: point at the block
			line = p.line
		}
		return nil, p.errAt(line, "%s: %s", strings.Join(opts, ", "), e.Msg)
	}
	l.model = m
	return l, nil
}

// errAt is caddy's error format (FILE:LINE - Error during parsing: ...)
// for a line other than the current token's.
func (p *parsing) errAt(line int, format string, a ...any) error {
	return fmt.Errorf("%s:%d - Error during parsing: %s", p.c.File(), line, fmt.Sprintf(format, a...))
}

func (p *parsing) option() error {
	c, l := p.c, p.l
	opt := c.Val()
	args := c.RemainingArgs()
	key := opt
	if (opt == "reload" || opt == "health-check" || opt == "bgp-peer") && len(args) > 0 {
		key = opt + " " + args[0] // one of each kind, one per peer
	}
	if err := p.once.UseAs(c, key); err != nil {
		return err
	}
	one := func() (string, error) {
		if len(args) != 1 {
			return "", c.ArgErr()
		}
		return args[0], nil
	}
	switch opt {
	case "kubeconfig":
		v, err := one()
		if err != nil {
			return err
		}
		if err := cluster.CheckPath(v); err != nil {
			return c.Errf("kubeconfig: %v", err)
		}
		l.kubeconfig = v
	case "cluster":
		v, err := one()
		p.spec.Name = v
		return err
	case "node":
		v, err := one()
		p.spec.Node = v
		return err
	case "api-vip", "ingress-vip":
		vips, err := parseAddrs(c, args)
		if err != nil {
			return err
		}
		if opt == "api-vip" {
			p.spec.APIVIPs = vips
		} else {
			p.spec.IngressVIPs = vips
		}
	case "interface":
		v, err := one()
		p.spec.Interface = v
		return err
	case "node-ip":
		if len(args) == 1 && args[0] == "auto" {
			p.spec.NodeIPs = nil
			return nil
		}
		ips, err := parseAddrs(c, args)
		if err != nil {
			return err
		}
		p.spec.NodeIPs = ips
	case "api-port", "lb-port", "health-port":
		v, err := one()
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			return c.Errf("%s must be a port in [1, 65535]: %q", opt, v)
		}
		switch opt {
		case "api-port":
			p.spec.APIPort = uint16(n)
		case "lb-port":
			p.spec.LBPort = uint16(n)
		default:
			p.spec.HealthPort = uint16(n)
		}
	case "keepalived", "haproxy":
		if len(args) < 1 || len(args) > 2 {
			return c.ArgErr()
		}
		for _, a := range args {
			if err := cluster.CheckPath(a); err != nil {
				return c.Errf("%s: %v", opt, err)
			}
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
		if len(args) != 2 || (args[0] != cluster.CheckAPI && args[0] != cluster.CheckIngress) {
			return c.Errf("health-check needs api|ingress and URL|none")
		}
		if err := cluster.CheckHealthURL(args[1]); err != nil {
			return c.Errf("health-check %s: %v", args[0], err)
		}
		if p.spec.Health == nil {
			p.spec.Health = map[string]string{}
		}
		p.spec.Health[args[0]] = args[1]
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
		if err := cluster.CheckNamespace(v); err != nil {
			return c.Errf("status-lease: %v", err)
		}
		l.statusNS = v
	case "unicast":
		if len(args) != 0 {
			return c.ArgErr()
		}
		p.spec.VRRP.Unicast = true
	case "ingress-service":
		v, err := one()
		p.spec.IngressService = v
		return err
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
		p.spec.StaticBackends = bs
	case "vrrp-version":
		v, err := one()
		if err != nil {
			return err
		}
		switch v {
		case "2", "3":
			p.spec.VRRP.Version = int(v[0] - '0')
		default:
			return c.Errf("vrrp-version must be 2 or 3: %q", v)
		}
	case "failover":
		v, err := one()
		if err != nil {
			return err
		}
		p.spec.VRRP.Failover = v
	case "advert-interval":
		v, err := one()
		if err != nil {
			return err
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return c.Errf("invalid advert-interval %q: %v", v, err)
		}
		p.spec.VRRP.AdvertInterval = d
	case "router-ids":
		if len(args) < 2 {
			return c.ArgErr()
		}
		for i, a := range args {
			n, err := strconv.ParseUint(a, 10, 8)
			if err != nil {
				return c.Errf("router-ids must be in [0, 255] (0: computed from the cluster name): %q", a)
			}
			if i == 0 {
				p.spec.RouterIDs.API = uint8(n)
			} else {
				p.spec.RouterIDs.Ingress = append(p.spec.RouterIDs.Ingress, uint8(n))
			}
		}
	case "track-dir":
		v, err := one()
		p.spec.TrackDir = v
		return err
	case "vip-mode":
		v, err := one()
		p.spec.Mode = v
		return err
	case "bgp-asn":
		v, err := one()
		if err != nil {
			return err
		}
		n, err := parseASN(v)
		if err != nil {
			return c.Errf("bgp-asn: %v", err)
		}
		p.spec.BGP.ASN = n
	case "bgp-router-id":
		v, err := one()
		if err != nil {
			return err
		}
		a, err := netip.ParseAddr(v)
		if err != nil {
			return c.Errf("bgp-router-id: %q is not an IPv4 address", v)
		}
		p.spec.BGP.RouterID = a
	case "bgp-speaker":
		if len(args) < 1 || len(args) > 2 || (args[0] != cluster.SpeakerTable && len(args) != 1) {
			return c.Errf("bgp-speaker needs embedded, or table [ID]")
		}
		p.spec.BGP.Speaker = args[0]
		if len(args) == 2 {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return c.Errf("bgp-speaker table %q: want a routing table number in [1, 252]", args[1])
			}
			p.spec.BGP.Table = n
		}
	case "bgp-peer":
		peer, err := parseBGPPeer(c, args)
		if err != nil {
			return err
		}
		p.peerLine = c.Line()
		p.spec.BGP.Peers = append(p.spec.BGP.Peers, peer)
	default:
		return c.Errf("unknown property '%s'", opt)
	}
	return nil
}

// parseAddrs shares the address rules of the DNS plugins (records.ParseSet:
// unicast, no zone, no duplicates); what may be a VIP is the cluster
// model's to say.
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
		if len(args) != 2 {
			return reloadSpec{}, c.Errf("reload %s %s needs one absolute PATH", what, args[0])
		}
		if err := cluster.CheckPath(args[1]); err != nil {
			return reloadSpec{}, c.Errf("reload %s %s needs one absolute PATH: %v", what, args[0], err)
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
