// Package lbpool holds the address pools of Services of type LoadBalancer
// and the allocation of their addresses: what a Service asks for and what
// the pools hold in, which addresses each Service gets out. It is pure:
// plugin/lbpools reads the pools from a ConfigMap, the Services from the
// API, and writes the results into the Services' status.
package lbpool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/infradns/infradns/internal/cluster"

	"go.yaml.in/yaml/v3"
)

// Range is the addresses From to To, both included, of one family.
type Range struct{ From, To netip.Addr }

// Contains reports whether a is in r.
func (r Range) Contains(a netip.Addr) bool {
	return a.BitLen() == r.From.BitLen() && r.From.Compare(a) <= 0 && a.Compare(r.To) <= 0
}

func (r Range) String() string {
	if r.From == r.To {
		return r.From.String()
	}
	return r.From.String() + "-" + r.To.String()
}

// Pool is a named set of addresses Services get theirs from.
type Pool struct {
	Name   string
	Ranges []Range
	// AutoAssign: a Service that names no pool and asks for no address
	// may get one from here. Off, the pool serves only Services that name
	// it or ask for one of its addresses (scarce or public addresses).
	AutoAssign bool
	// Namespaces the pool serves; none: every namespace.
	Namespaces []string
	// Line is where the pool starts in its source, for messages.
	Line int
}

// Serves reports whether the pool gives addresses to namespace ns.
func (p *Pool) Serves(ns string) bool {
	return len(p.Namespaces) == 0 || slices.Contains(p.Namespaces, ns)
}

// Contains reports whether a is one of the pool's addresses.
func (p *Pool) Contains(a netip.Addr) bool {
	for _, r := range p.Ranges {
		if r.Contains(a) {
			return true
		}
	}
	return false
}

// Size is the number of addresses of family v6 (false: IPv4) the pool
// holds, capped at 2^53 (an IPv6 /64 is "more than any cluster uses").
func (p *Pool) Size(v6 bool) float64 {
	total := new(big.Int)
	for _, r := range p.Ranges {
		if r.From.Is6() != v6 {
			continue
		}
		from := new(big.Int).SetBytes(r.From.AsSlice())
		to := new(big.Int).SetBytes(r.To.AsSlice())
		total.Add(total, to.Sub(to, from).Add(to, big.NewInt(1)))
	}
	f, _ := new(big.Float).SetInt(total).Float64()
	return min(f, 1<<53)
}

// Config is the pools, in the order auto-assignment tries them.
type Config struct {
	Pools []Pool
}

// Pool returns the pool named name, nil when there is none.
func (c *Config) Pool(name string) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Name == name {
			return &c.Pools[i]
		}
	}
	return nil
}

// Of returns the pool holding a, nil when no pool does.
func (c *Config) Of(a netip.Addr) *Pool {
	for i := range c.Pools {
		if c.Pools[i].Contains(a) {
			return &c.Pools[i]
		}
	}
	return nil
}

// The source form: a YAML document in the ConfigMap's data key.
type source struct {
	Pools []yaml.Node `yaml:"pools"`
}

type poolSource struct {
	Name       string   `yaml:"name"`
	Addresses  []string `yaml:"addresses"`
	AutoAssign *bool    `yaml:"autoAssign"`
	Namespaces []string `yaml:"namespaces"`
}

var poolFields = []string{"name", "addresses", "autoAssign", "namespaces"}

// Parse reads pools written as
//
//	pools:
//	- name: default
//	  addresses: [192.0.2.100-192.0.2.150, 2001:db8:100::/120]
//	  autoAssign: true        # the default
//	  namespaces: [shop]      # default: every namespace
//
// Errors say LINE: what is wrong. An IPv4 CIDR of /30 or wider leaves out
// its network and broadcast addresses: some clients and routers still treat
// them as such; an IPv6 CIDR of /126 or wider its first address (the
// Subnet-Router anycast address). Pools may not overlap, so an address has
// one pool.
func Parse(b []byte) (Config, error) {
	var src source
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&src); err != nil {
		if errors.Is(err, io.EOF) {
			return Config{}, errors.New("empty: want pools: [{name: NAME, addresses: [RANGE or CIDR, ...]}, ...]")
		}
		return Config{}, yamlError(err)
	}
	var cfg Config
	for _, n := range src.Pools {
		// Node.Decode does not refuse unknown fields as the decoder does.
		if n.Kind == yaml.MappingNode {
			for k := 0; k+1 < len(n.Content); k += 2 {
				if key := n.Content[k]; !slices.Contains(poolFields, key.Value) {
					return Config{}, fmt.Errorf("%d: field %s not found: a pool has %s", key.Line, key.Value, strings.Join(poolFields, ", "))
				}
			}
		}
		var ps poolSource
		if err := n.Decode(&ps); err != nil {
			return Config{}, yamlError(err)
		}
		p := Pool{Name: ps.Name, AutoAssign: ps.AutoAssign == nil || *ps.AutoAssign, Line: n.Line}
		fail := func(format string, a ...any) (Config, error) {
			return Config{}, fmt.Errorf("%d: pool %q: %s", n.Line, p.Name, fmt.Sprintf(format, a...))
		}
		if err := cluster.CheckLabel(p.Name); err != nil {
			return fail("name: %v", err)
		}
		if cfg.Pool(p.Name) != nil {
			return fail("a second pool of that name (first on line %d)", cfg.Pool(p.Name).Line)
		}
		if len(ps.Addresses) == 0 {
			return fail("no addresses: want addresses: [192.0.2.10-192.0.2.20, 2001:db8::/120, ...]")
		}
		for _, a := range ps.Addresses {
			r, err := parseRange(a)
			if err != nil {
				return fail("%v", err)
			}
			for _, q := range append(cfg.Pools, p) {
				for _, o := range q.Ranges {
					if o.Contains(r.From) || o.Contains(r.To) || r.Contains(o.From) {
						return fail("%s overlaps %s of pool %q (line %d): an address belongs to one pool", r, o, q.Name, q.Line)
					}
				}
			}
			p.Ranges = append(p.Ranges, r)
		}
		for _, ns := range ps.Namespaces {
			if err := cluster.CheckNamespace(ns); err != nil {
				return fail("namespaces: %v", err)
			}
		}
		p.Namespaces = slices.Compact(slices.Sorted(slices.Values(ps.Namespaces)))
		cfg.Pools = append(cfg.Pools, p)
	}
	return cfg, nil
}

// parseRange reads FROM-TO, a CIDR or one address.
func parseRange(s string) (Range, error) {
	s = strings.TrimSpace(s)
	if from, to, ok := strings.Cut(s, "-"); ok {
		f, err1 := netip.ParseAddr(strings.TrimSpace(from))
		t, err2 := netip.ParseAddr(strings.TrimSpace(to))
		switch {
		case err1 != nil || err2 != nil:
			return Range{}, fmt.Errorf("%q: want FROM-TO with two addresses", s)
		case f.Zone() != "" || t.Zone() != "":
			return Range{}, fmt.Errorf("%q: an address with a zone", s)
		case f.Is4In6() || t.Is4In6():
			return Range{}, fmt.Errorf("%q: write IPv4 addresses as IPv4", s)
		case f.BitLen() != t.BitLen():
			return Range{}, fmt.Errorf("%q: both ends of one family", s)
		case t.Less(f):
			return Range{}, fmt.Errorf("%q: the range ends before it starts", s)
		}
		return unicast(Range{f, t}, s)
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return Range{}, fmt.Errorf("%q: %v", s, err)
		}
		if p.Addr().Is4In6() {
			return Range{}, fmt.Errorf("%q: write IPv4 prefixes as IPv4", s)
		}
		if p != p.Masked() {
			return Range{}, fmt.Errorf("%q: host bits set (the prefix is %s)", s, p.Masked())
		}
		r := Range{p.Addr(), last(p)}
		switch {
		case p.Addr().Is4() && p.Bits() <= 30:
			r = Range{r.From.Next(), r.To.Prev()}
		case p.Addr().Is6() && p.Bits() <= 126:
			// The first is the prefix's Subnet-Router anycast address
			// (RFC 4291 2.6.1), which a router on the subnet answers.
			r.From = r.From.Next()
		}
		return unicast(r, s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Is4In6() {
		return Range{}, fmt.Errorf("%q: want FROM-TO, a CIDR or an address", s)
	}
	return unicast(Range{a, a}, s)
}

func unicast(r Range, s string) (Range, error) {
	for _, a := range []netip.Addr{r.From, r.To} {
		if a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a.IsLinkLocalUnicast() || a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return Range{}, fmt.Errorf("%q: %s cannot be a Service's address", s, a)
		}
	}
	if r.From.Is4() && (r.From.As4()[0] >= 224) != (r.To.As4()[0] >= 224) {
		return Range{}, fmt.Errorf("%q: runs into multicast", s)
	}
	return r, nil
}

func last(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

var yamlLine = regexp.MustCompile(`^yaml: (?:unmarshal errors:\n\s*)?line (\d+): (.*)$`)

// yamlError is YAML's error as LINE: message.
func yamlError(err error) error {
	msg := strings.TrimSpace(err.Error())
	m := yamlLine.FindStringSubmatch(msg)
	if m == nil {
		return errors.New(strings.TrimPrefix(msg, "yaml: "))
	}
	line, _ := strconv.Atoi(m[1])
	if strings.HasPrefix(m[2], "did not find expected") {
		line++
	}
	return fmt.Errorf("%d: %s", line, m[2])
}
