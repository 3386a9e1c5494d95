// Package onemap is a benchmark fixture, not part of the product: a CoreDNS
// plugin that answers from one map lookup of pre-built records, the cheapest
// way a plugin can serve a fixed set of names. hack/bench.sh compiles it into
// bin/coredns-bench (build tag benchmap) as the ceiling our plugins are
// measured against.
//
//	onemap ZONE FILE
//
// FILE holds one "NAME IPV4 IPV6" line per name, or "NAME PTR TARGET" for a
// reverse name. A listed name answers A, AAAA or PTR with its record (other
// types: empty NOERROR); any other name in ZONE is NXDOMAIN; names outside
// ZONE go to the next plugin. There is no SOA.
package onemap

import (
	"bufio"
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"

	"github.com/miekg/dns"
)

const pluginName = "onemap"

// ttl matches the infradns plugins' default, so answers are the same size.
const ttl = 30

func init() { plugin.Register(pluginName, setup) }

// OneMap is the onemap handler.
type OneMap struct {
	Next  plugin.Handler
	Zone  string
	names map[string]entry // lower-case FQDN → its records
}

type entry struct {
	a, aaaa, ptr []dns.RR
}

func setup(c *caddy.Controller) error {
	h, err := parse(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		h.Next = next
		return h
	})
	return nil
}

func parse(c *caddy.Controller) (*OneMap, error) {
	h := &OneMap{}
	for c.Next() {
		args := c.RemainingArgs()
		if len(args) != 2 {
			return nil, c.ArgErr()
		}
		h.Zone = dns.CanonicalName(args[0])
		f, err := os.Open(args[1])
		if err != nil {
			return nil, c.Errf("open names file: %v", err)
		}
		h.names, err = load(f)
		f.Close()
		if err != nil {
			return nil, c.Errf("%s: %v", args[1], err)
		}
	}
	return h, nil
}

func load(f *os.File) (map[string]entry, error) {
	names := map[string]entry{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		if len(fs) != 3 {
			return nil, fmt.Errorf("line %d: want NAME IPV4 IPV6 or NAME PTR TARGET", n)
		}
		name := dns.CanonicalName(fs[0])
		if strings.EqualFold(fs[1], "PTR") {
			if _, ok := dns.IsDomainName(fs[2]); !ok {
				return nil, fmt.Errorf("line %d: bad PTR target %q", n, fs[2])
			}
			e := names[name]
			e.ptr = append(e.ptr, &dns.PTR{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: dns.CanonicalName(fs[2])})
			names[name] = e
			continue
		}
		v4, err4 := netip.ParseAddr(fs[1])
		v6, err6 := netip.ParseAddr(fs[2])
		if err4 != nil || err6 != nil || !v4.Is4() || !v6.Is6() {
			return nil, fmt.Errorf("line %d: bad addresses %q %q", n, fs[1], fs[2])
		}
		names[name] = entry{
			a:    []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: v4.AsSlice()}},
			aaaa: []dns.RR{&dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: v6.AsSlice()}},
		}
	}
	return names, sc.Err()
}

// ServeDNS implements the plugin.Handler interface.
func (h *OneMap) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	q := r.Question[0]
	qname := strings.ToLower(q.Name)
	e, ok := h.names[qname]
	if !ok && !dns.IsSubDomain(h.Zone, qname) {
		return plugin.NextOrFailure(h.Name(), h.Next, ctx, w, r)
	}
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	switch {
	case !ok:
		m.Rcode = dns.RcodeNameError
	case q.Qtype == dns.TypeA:
		// Shared, not copied: the point is the cheapest possible answer. (cache
		// rewrites answer TTLs in place, but to the value they already have.)
		m.Answer = e.a
	case q.Qtype == dns.TypeAAAA:
		m.Answer = e.aaaa
	case q.Qtype == dns.TypePTR:
		m.Answer = e.ptr
	}
	w.WriteMsg(m)
	return m.Rcode, nil
}

// Name implements the plugin.Handler interface.
func (h *OneMap) Name() string { return pluginName }
