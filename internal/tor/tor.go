// Package tor renders the top-of-rack side of the nodes' BGP sessions, for
// FRR and for BIRD 2: the configuration the operator guide prints and the
// lab's routed tests run, from one function each, so the two cannot drift.
//
// Every node is a declared neighbour. FRR's dynamic neighbours (`bgp listen
// range`) never settled with the embedded speaker and BFD: GoBGP binds the
// first BFD session of a neighbour, FRR's re-created dynamic neighbour comes
// back with a new session (your-discriminator 0), GoBGP drops its packets
// until BFD expires, FRR deletes the neighbour, and round it goes (108 route
// changes in 60 s in the lab).
package tor

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Defaults: the cluster file's (internal/cluster) for the sessions, so both
// ends agree without negotiation.
const (
	DefaultHoldTime      = 9 * time.Second
	DefaultKeepalive     = 3 * time.Second
	DefaultBFDInterval   = 100 * time.Millisecond
	DefaultBFDMultiplier = 3
	DefaultMaxPaths      = 16
)

// Config is the ToR's side of the sessions with the nodes.
type Config struct {
	// ASN is the ToR's own AS number.
	ASN uint32
	// RouterID is written when set; unset, the daemon picks one.
	RouterID netip.Addr
	// Peers are the nodes, each declared.
	Peers []Peer
	// BFD runs single-hop BFD on every session, BFDInterval both ways ×
	// BFDMultiplier.
	BFD           bool
	BFDInterval   time.Duration
	BFDMultiplier int
	// HoldTime and Keepalive of the sessions.
	HoldTime, Keepalive time.Duration
	// ConnectRetry, when set, is how soon the ToR tries a lost session
	// again (the daemons' defaults: FRR 10 s, BIRD 120 s).
	ConnectRetry time.Duration
	// VIPs are the prefixes the VIPs come from: only host routes inside
	// them are accepted from the nodes. Empty: every route is accepted.
	VIPs []netip.Prefix
	// MaxPaths bounds the ECMP next hops of one prefix.
	MaxPaths int
	// KernelTable, when set, is the kernel routing table BIRD installs
	// the routes in instead of the main one: a lab switch that programs
	// its forwarding from there (resilient next-hop groups). FRR ignores it.
	KernelTable int
}

// Example is the ToR of the operator guide's example: three nodes in one
// rack (AS 64513), the ToR in AS 64512, the example cluster's VIPs in
// 192.0.2.0/24, BFD and timers at the cluster file's defaults. The guide
// prints FRR(Example) and BIRD(Example).
var Example = Config{
	ASN: 64512,
	Peers: []Peer{
		{Addr: netip.MustParseAddr("198.51.100.11"), ASN: 64513},
		{Addr: netip.MustParseAddr("198.51.100.12"), ASN: 64513},
		{Addr: netip.MustParseAddr("198.51.100.13"), ASN: 64513},
	},
	BFD:  true,
	VIPs: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")},
}

// Peer is one node's session.
type Peer struct {
	Addr netip.Addr
	ASN  uint32
	// Password turns on TCP MD5 signatures (RFC 2385).
	Password string
}

func (c Config) withDefaults() Config {
	if c.HoldTime == 0 {
		c.HoldTime = DefaultHoldTime
	}
	if c.Keepalive == 0 {
		c.Keepalive = DefaultKeepalive
	}
	if c.BFDInterval == 0 {
		c.BFDInterval = DefaultBFDInterval
	}
	if c.BFDMultiplier == 0 {
		c.BFDMultiplier = DefaultBFDMultiplier
	}
	if c.MaxPaths == 0 {
		c.MaxPaths = DefaultMaxPaths
	}
	return c
}

// Check reports what neither daemon would accept.
func (c Config) Check() error {
	if c.ASN == 0 {
		return fmt.Errorf("the ToR's ASN is not set")
	}
	if len(c.Peers) == 0 {
		return fmt.Errorf("no node to peer with")
	}
	seen := map[netip.Addr]bool{}
	for _, p := range c.Peers {
		if !p.Addr.IsValid() || p.ASN == 0 {
			return fmt.Errorf("peer %v: address and ASN are required", p.Addr)
		}
		if seen[p.Addr] {
			return fmt.Errorf("peer %v listed twice", p.Addr)
		}
		seen[p.Addr] = true
		if strings.ContainsAny(p.Password, "\"\n ") {
			return fmt.Errorf("peer %v: the password may not hold spaces, quotes or new lines", p.Addr)
		}
	}
	if c.RouterID.IsValid() && !c.RouterID.Is4() {
		return fmt.Errorf("router ID %v: an IPv4 address", c.RouterID)
	}
	if c.Keepalive >= c.HoldTime && c.HoldTime > 0 {
		return fmt.Errorf("keepalive %v must be below the hold time %v", c.Keepalive, c.HoldTime)
	}
	for _, v := range c.VIPs {
		if !v.IsValid() || v != v.Masked() {
			return fmt.Errorf("VIP prefix %v: not a network prefix", v)
		}
	}
	return nil
}

// secs is a duration in whole seconds, at least 1.
func secs(d time.Duration) int { return max(1, int(d.Round(time.Second)/time.Second)) }

func hostBits(p netip.Prefix) int {
	if p.Addr().Is4() {
		return 32
	}
	return 128
}

// FRR is an integrated frr.conf for FRR 8.4 (vtysh -f, or
// /etc/frr/frr.conf). Routes go into the kernel inline (one route with a
// next hop per node): 8.4's kernel nexthop groups lose a member after a
// link flap.
func FRR(c Config) string {
	c = c.withDefaults()
	var b strings.Builder
	b.WriteString("frr defaults datacenter\nno zebra nexthop kernel enable\n")
	if c.BFD {
		fmt.Fprintf(&b, "bfd\n profile fast\n  transmit-interval %d\n  receive-interval %d\n  detect-multiplier %d\n exit\nexit\n",
			c.BFDInterval.Milliseconds(), c.BFDInterval.Milliseconds(), c.BFDMultiplier)
	}
	filter := len(c.VIPs) > 0
	if filter {
		seq4, seq6 := 5, 5
		for _, v := range c.VIPs {
			ge := ""
			if v.Bits() < hostBits(v) {
				ge = fmt.Sprintf(" ge %d", hostBits(v))
			}
			if v.Addr().Is4() {
				fmt.Fprintf(&b, "ip prefix-list infradns-vips seq %d permit %s%s\n", seq4, v, ge)
				seq4 += 5
			} else {
				fmt.Fprintf(&b, "ipv6 prefix-list infradns-vips6 seq %d permit %s%s\n", seq6, v, ge)
				seq6 += 5
			}
		}
		if seq4 > 5 {
			b.WriteString("route-map infradns-vips permit 10\n match ip address prefix-list infradns-vips\nexit\n")
		}
		if seq6 > 5 {
			b.WriteString("route-map infradns-vips permit 20\n match ipv6 address prefix-list infradns-vips6\nexit\n")
		}
	}
	fmt.Fprintf(&b, "router bgp %d\n", c.ASN)
	if c.RouterID.IsValid() {
		fmt.Fprintf(&b, " bgp router-id %s\n", c.RouterID)
	}
	if !filter {
		// Without an inbound policy eBGP routes are refused (RFC 8212).
		b.WriteString(" no bgp ebgp-requires-policy\n")
	}
	b.WriteString(" bgp bestpath as-path multipath-relax\n")
	for _, p := range c.Peers {
		fmt.Fprintf(&b, " neighbor %s remote-as %d\n neighbor %s timers %d %d\n", p.Addr, p.ASN, p.Addr, secs(c.Keepalive), secs(c.HoldTime))
		if c.ConnectRetry > 0 {
			fmt.Fprintf(&b, " neighbor %s timers connect %d\n", p.Addr, secs(c.ConnectRetry))
		}
		if p.Password != "" {
			fmt.Fprintf(&b, " neighbor %s password %s\n", p.Addr, p.Password)
		}
		if c.BFD {
			fmt.Fprintf(&b, " neighbor %s bfd profile fast\n", p.Addr)
		}
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		fmt.Fprintf(&b, " address-family %s unicast\n  maximum-paths %d\n", fam, c.MaxPaths)
		for _, p := range c.Peers {
			if (fam == "ipv6") != p.Addr.Is6() {
				fmt.Fprintf(&b, "  no neighbor %s activate\n", p.Addr)
				continue
			}
			fmt.Fprintf(&b, "  neighbor %s activate\n", p.Addr)
			if filter {
				fmt.Fprintf(&b, "  neighbor %s route-map infradns-vips in\n", p.Addr)
			}
		}
		b.WriteString(" exit-address-family\n")
	}
	b.WriteString("exit\n")
	return b.String()
}

// BIRD is a bird.conf for BIRD 2: one BGP protocol per node, and kernel
// protocols that merge the nodes' equal routes into ECMP routes.
func BIRD(c Config) string {
	c = c.withDefaults()
	var b strings.Builder
	if c.RouterID.IsValid() {
		fmt.Fprintf(&b, "router id %s;\n", c.RouterID)
	}
	b.WriteString("protocol device { }\n")
	for _, fam := range []string{"ipv4", "ipv6"} {
		table := ""
		if c.KernelTable != 0 {
			table = fmt.Sprintf("kernel table %d; ", c.KernelTable)
		}
		fmt.Fprintf(&b, "protocol kernel { %s%s { import none; export all; }; merge paths on; }\n", table, fam)
	}
	if c.BFD {
		fmt.Fprintf(&b, "protocol bfd { interface \"*\" { min rx interval %d ms; min tx interval %d ms; multiplier %d; }; }\n",
			c.BFDInterval.Milliseconds(), c.BFDInterval.Milliseconds(), c.BFDMultiplier)
	}
	for i, p := range c.Peers {
		fam := "ipv4"
		if p.Addr.Is6() {
			fam = "ipv6"
		}
		fmt.Fprintf(&b, "protocol bgp node%d {\n  neighbor %s as %d; local as %d;\n", i, p.Addr, p.ASN, c.ASN)
		fmt.Fprintf(&b, "  hold time %d; keepalive time %d;", secs(c.HoldTime), secs(c.Keepalive))
		if c.ConnectRetry > 0 {
			fmt.Fprintf(&b, " connect retry time %d; connect delay time %d;", secs(c.ConnectRetry), secs(c.ConnectRetry))
		}
		// BIRD's default (60 s, doubling to 300 s) kept a node idle 41 s
		// after its link came back.
		b.WriteString(" error wait time 1, 5;\n")
		if p.Password != "" {
			fmt.Fprintf(&b, "  password \"%s\";\n", p.Password)
		}
		if c.BFD {
			b.WriteString("  bfd on;\n")
		}
		fmt.Fprintf(&b, "  %s { import %s; export none; };\n}\n", fam, birdImport(c.VIPs, p.Addr.Is6()))
	}
	return b.String()
}

// birdImport is the import filter of one family: host routes inside the
// VIP prefixes, or all.
func birdImport(vips []netip.Prefix, six bool) string {
	var sets []string
	for _, v := range vips {
		if v.Addr().Is6() == six {
			sets = append(sets, fmt.Sprintf("%s{%d,%d}", v, hostBits(v), hostBits(v)))
		}
	}
	if len(vips) == 0 {
		return "all"
	}
	if len(sets) == 0 {
		return "none"
	}
	return "where net ~ [ " + strings.Join(sets, ", ") + " ]"
}
