package lbconfig

import (
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/coredns/caddy"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/records"
)

// option is one Corefile option of lbconfig, declared once so that the
// parser, the checks after the block and the errors of the cluster model
// cannot disagree about it.
type option struct {
	name  string
	parse parseFunc
	// keys are the cluster model keys the option sets: an error about one
	// points at this option's line, in the option's words.
	keys []string
	// perArg options are used once per first argument (a kind, a peer's
	// address), not once.
	perArg bool
	// bgpOnly options would be silently ignored with VRRP, so they are
	// refused without 'vip-mode bgp'.
	bgpOnly bool
}

type parseFunc func(p *parsing, args []string) error

// options are in the order of the README's Syntax section (TestOptionsREADME),
// so the table reads like the documentation.
var options = []option{
	{name: "cluster", keys: []string{cluster.KeyCluster}, parse: text(func(s *cluster.Spec) *string { return &s.Name })},
	{name: "api-vip", keys: []string{cluster.KeyAPIVIPs}, parse: addrs(func(s *cluster.Spec) *[]netip.Addr { return &s.APIVIPs })},
	{name: "keepalived", parse: (*parsing).outputs},
	{name: "haproxy", parse: (*parsing).outputs},
	{name: "kubeconfig", parse: checked(cluster.CheckPath, func(l *LBConfig) *string { return &l.kubeconfig })},
	{name: "node", keys: []string{cluster.KeyNode}, parse: text(func(s *cluster.Spec) *string { return &s.Node })},
	{name: "ingress-vip", keys: []string{cluster.KeyIngressVIPs}, parse: addrs(func(s *cluster.Spec) *[]netip.Addr { return &s.IngressVIPs })},
	{name: "interface", keys: []string{cluster.KeyInterface}, parse: text(func(s *cluster.Spec) *string { return &s.Interface })},
	{name: "node-ip", keys: []string{cluster.KeyNodeIPs}, parse: func(p *parsing, args []string) error {
		if len(args) == 1 && args[0] == "auto" {
			p.spec.NodeIPs = nil
			return nil
		}
		var err error
		p.spec.NodeIPs, err = parseAddrs(p.c, args)
		return err
	}},
	{name: "api-port", keys: []string{cluster.KeyAPIPort}, parse: port(func(s *cluster.Spec) *uint16 { return &s.APIPort })},
	{name: "lb-port", keys: []string{cluster.KeyLBPort}, parse: port(func(s *cluster.Spec) *uint16 { return &s.LBPort })},
	{name: "health-port", keys: []string{cluster.KeyHealthPort}, parse: port(func(s *cluster.Spec) *uint16 { return &s.HealthPort })},
	{name: "reload", perArg: true, parse: func(p *parsing, args []string) error {
		c := p.c
		if len(args) < 2 || (args[0] != "keepalived" && args[0] != "haproxy") {
			return c.Errf("reload needs keepalived|haproxy and a method: pidfile PATH, socket PATH, none or COMMAND...")
		}
		what, r := args[0], reloadSpec{method: args[1]}
		switch r.method {
		case "pidfile", "socket":
			if len(args) != 3 {
				return c.Errf("reload %s %s needs one absolute PATH", what, r.method)
			}
			if err := cluster.CheckPath(args[2]); err != nil {
				return c.Errf("reload %s %s needs one absolute PATH: %v", what, r.method, err)
			}
			if r.method == "socket" && what != "haproxy" {
				return c.Errf("reload %s socket: only haproxy has a master socket", what)
			}
			r.path = args[2]
		case "none":
			if len(args) != 2 {
				return c.ArgErr()
			}
		default:
			r = reloadSpec{method: "command", argv: args[1:]}
		}
		p.l.reload[lb.Kind(what)] = r
		return nil
	}},
	{name: "health-check", keys: []string{cluster.KeyHealth}, perArg: true, parse: func(p *parsing, args []string) error {
		if len(args) != 2 || (args[0] != cluster.CheckAPI && args[0] != cluster.CheckIngress && args[0] != cluster.CheckServices) {
			return p.c.Errf("health-check needs api|ingress|services and URL|none")
		}
		if err := cluster.CheckHealthURL(args[1]); err != nil {
			return p.c.Errf("health-check %s: %v", args[0], err)
		}
		if args[0] == cluster.CheckServices {
			// lbconfig's own gate of the Services it announces, not a
			// VIP group's: the cluster model has no Services.
			p.l.servicesHealth = args[1]
			return nil
		}
		if p.spec.Health == nil {
			p.spec.Health = map[string]string{}
		}
		p.spec.Health[args[0]] = args[1]
		return nil
	}},
	{name: "vrrp-guard", parse: one(func(p *parsing, v string) error {
		if v == "off" {
			p.l.guardWindow = 0
			return nil
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > time.Minute {
			return p.c.Errf("vrrp-guard must be a duration in (0, 1m] or off: %q", v)
		}
		p.l.guardWindow = d
		return nil
	})},
	{name: "status-lease", parse: checked(cluster.CheckNamespace, func(l *LBConfig) *string { return &l.statusNS })},
	{name: "unicast", keys: []string{cluster.KeyUnicast}, parse: func(p *parsing, args []string) error {
		if len(args) != 0 {
			return p.c.ArgErr()
		}
		p.spec.VRRP.Unicast = true
		return nil
	}},
	{name: "ingress-service", keys: []string{cluster.KeyIngressService}, parse: text(func(s *cluster.Spec) *string { return &s.IngressService })},
	{name: "backends", keys: []string{cluster.KeyAPIServers}, parse: func(p *parsing, args []string) error {
		if len(args) == 0 {
			return p.c.ArgErr()
		}
		var bs []netip.AddrPort
		for _, a := range args {
			ap, err := netip.ParseAddrPort(a)
			if err != nil {
				ip, err2 := netip.ParseAddr(a)
				if err2 != nil {
					return p.c.Errf("invalid backend %q: want ADDRESS or ADDRESS:PORT", a)
				}
				ap = netip.AddrPortFrom(ip, 0) // api-port
			}
			bs = append(bs, ap)
		}
		p.spec.StaticBackends = bs
		return nil
	}},
	{name: "vrrp-version", keys: []string{cluster.KeyVRRPVersion}, parse: one(func(p *parsing, v string) error {
		if v != "2" && v != "3" {
			return p.c.Errf("vrrp-version must be 2 or 3: %q", v)
		}
		p.spec.VRRP.Version = int(v[0] - '0')
		return nil
	})},
	{name: "failover", keys: []string{cluster.KeyFailover}, parse: text(func(s *cluster.Spec) *string { return &s.VRRP.Failover })},
	{name: "advert-interval", keys: []string{cluster.KeyAdvertInterval}, parse: one(func(p *parsing, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return p.c.Errf("invalid advert-interval %q: %v", v, err)
		}
		p.spec.VRRP.AdvertInterval = d
		return nil
	})},
	{name: "router-ids", keys: []string{cluster.KeyRouterIDs}, parse: func(p *parsing, args []string) error {
		if len(args) < 2 {
			return p.c.ArgErr()
		}
		for i, a := range args {
			n, err := strconv.ParseUint(a, 10, 8)
			if err != nil {
				return p.c.Errf("router-ids must be in [0, 255] (0: computed from the cluster name): %q", a)
			}
			if i == 0 {
				p.spec.RouterIDs.API = uint8(n)
			} else {
				p.spec.RouterIDs.Ingress = append(p.spec.RouterIDs.Ingress, uint8(n))
			}
		}
		return nil
	}},
	{name: "track-dir", keys: []string{cluster.KeyTrackDir}, parse: text(func(s *cluster.Spec) *string { return &s.TrackDir })},
	{name: "vip-mode", keys: []string{cluster.KeyVIPMode}, parse: text(func(s *cluster.Spec) *string { return &s.Mode })},
	{name: "bgp-asn", keys: []string{cluster.KeyBGPASN}, bgpOnly: true, parse: one(func(p *parsing, v string) error {
		n, err := parseASN(v)
		if err != nil {
			return p.c.Errf("bgp-asn: %v", err)
		}
		p.spec.BGP.ASN = n
		return nil
	})},
	{name: "bgp-router-id", keys: []string{cluster.KeyBGPRouterID}, bgpOnly: true, parse: one(func(p *parsing, v string) error {
		a, err := netip.ParseAddr(v)
		if err != nil {
			return p.c.Errf("bgp-router-id: %q is not an IPv4 address", v)
		}
		p.spec.BGP.RouterID = a
		return nil
	})},
	{name: "bgp-speaker", keys: []string{cluster.KeyBGPSpeaker, cluster.KeyBGPTable}, bgpOnly: true, parse: func(p *parsing, args []string) error {
		if len(args) < 1 || len(args) > 2 || (args[0] != cluster.SpeakerTable && len(args) != 1) {
			return p.c.Errf("bgp-speaker needs embedded, or table [ID]")
		}
		p.spec.BGP.Speaker = args[0]
		if len(args) == 2 {
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return p.c.Errf("bgp-speaker table %q: want a routing table number in [1, 252]", args[1])
			}
			p.spec.BGP.Table = n
		}
		return nil
	}},
	{name: "bgp-peer", keys: []string{cluster.KeyBGPPeers}, perArg: true, bgpOnly: true, parse: func(p *parsing, args []string) error {
		peer, err := parseBGPPeer(p.c, args)
		p.spec.BGP.Peers = append(p.spec.BGP.Peers, peer)
		return err
	}},
	{name: "bgp-relay", bgpOnly: true, parse: one(func(p *parsing, v string) error {
		if v != "on" && v != "off" {
			return p.c.Errf("bgp-relay must be on or off: %q", v)
		}
		p.l.noRelay = v == "off"
		return nil
	})},
	{name: "resolver-ready", bgpOnly: true, parse: one(func(p *parsing, v string) error {
		if err := cluster.CheckHealthURL(v); err != nil || v == cluster.HealthNone {
			return p.c.Errf("resolver-ready: %q is not an http(s) URL with a host", v)
		}
		p.l.resolverReady = v
		return nil
	})},
	{name: "services", bgpOnly: true, parse: func(p *parsing, args []string) error {
		if len(args) > 1 || len(args) == 1 && args[0] != "default" {
			return p.c.Errf("services takes nothing, or 'default' (also the Services with no loadBalancerClass): %q", args)
		}
		p.l.services = &serviceOpts{isDefault: len(args) == 1}
		return nil
	}},
}

// optionOf names the option that sets a cluster model key, or the key
// itself if none does (TestClusterKeysHaveOptions keeps that from happening).
func optionOf(key string) string {
	for _, o := range options {
		if slices.Contains(o.keys, key) {
			return o.name
		}
	}
	return key
}

// option reads the option under the cursor. once has the options by name,
// or by name and first argument for perArg ones; given, by name alone.
func (p *parsing) option() error {
	c := p.c
	p.opt = c.Val()
	args := c.RemainingArgs()
	i := slices.IndexFunc(options, func(o option) bool { return o.name == p.opt })
	if i < 0 {
		return c.Errf("unknown property '%s'", p.opt)
	}
	key := p.opt
	if options[i].perArg && len(args) > 0 {
		key += " " + args[0]
	}
	if err := p.once.UseAs(c, key); err != nil {
		return err
	}
	p.given[p.opt] = c.Line()
	return options[i].parse(p, args)
}

// one is an option of exactly one argument.
func one(parse func(p *parsing, v string) error) parseFunc {
	return func(p *parsing, args []string) error {
		if len(args) != 1 {
			return p.c.ArgErr()
		}
		return parse(p, args[0])
	}
}

// text is an option whose one argument the cluster model checks.
func text(field func(*cluster.Spec) *string) parseFunc {
	return one(func(p *parsing, v string) error {
		*field(&p.spec) = v
		return nil
	})
}

// checked is an option of one argument that check accepts.
func checked(check func(string) error, field func(*LBConfig) *string) parseFunc {
	return one(func(p *parsing, v string) error {
		if err := check(v); err != nil {
			return p.c.Errf("%s: %v", p.opt, err)
		}
		*field(p.l) = v
		return nil
	})
}

// port refuses 0 here, where the model would take it for the default.
func port(field func(*cluster.Spec) *uint16) parseFunc {
	return one(func(p *parsing, v string) error {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			return p.c.Errf("%s must be a port in [1, 65535]: %q", p.opt, v)
		}
		*field(&p.spec) = uint16(n)
		return nil
	})
}

// addrs is api-vip and ingress-vip (node-ip adds "auto" to the same rules).
func addrs(field func(*cluster.Spec) *[]netip.Addr) parseFunc {
	return func(p *parsing, args []string) error {
		a, err := parseAddrs(p.c, args)
		*field(&p.spec) = a
		return err
	}
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

// outputs is keepalived and haproxy: OUTPUT [TEMPLATE].
func (p *parsing) outputs(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return p.c.ArgErr()
	}
	for _, a := range args {
		if err := cluster.CheckPath(a); err != nil {
			return p.c.Errf("%s: %v", p.opt, err)
		}
	}
	o := output{path: args[0]}
	if len(args) == 2 {
		o.template = args[1]
	}
	p.l.outputs[lb.Kind(p.opt)] = o // the options are named after the kinds
	return nil
}
