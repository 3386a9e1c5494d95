package mdns

import (
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// refreshAt are the fractions of a record's TTL at which a resolver asks
// again before it expires (RFC 6762 5.2), each plus up to 2 % jitter.
var refreshAt = [...]float64{0.80, 0.85, 0.90, 0.95}

// Next returns when the cache next needs attention (an expiry or a refresh
// query), or the zero time when it is empty.
func (c *Cache) Next() time.Time {
	var next time.Time
	see := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	visit := func(r *rec) {
		see(r.exp)
		if !r.bye && r.stage < len(refreshAt) {
			see(r.refreshTime())
		}
	}
	for _, in := range c.instances {
		if in.hasSRV {
			visit(&in.srv)
		}
		if in.hasTXT {
			see(in.txt.exp)
		}
	}
	for _, h := range c.hosts {
		for _, r := range h.addrs {
			visit(r)
		}
	}
	return next
}

func (r *rec) refreshTime() time.Time {
	f := refreshAt[r.stage] + r.jitter
	return r.recv.Add(time.Duration(f * float64(time.Duration(r.ttl)*time.Second)))
}

// Due returns the refresh questions due at now (RFC 6762 5.2) and advances
// each record past the refresh points it has reached.
func (c *Cache) Due(now time.Time) []dns.Question {
	var qs []dns.Question
	add := func(q dns.Question) {
		if !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	due := func(r *rec) bool {
		hit := false
		for !r.bye && r.stage < len(refreshAt) && !now.Before(r.refreshTime()) {
			r.stage++
			hit = true
		}
		return hit
	}
	for name, in := range c.instances {
		if in.hasSRV && due(&in.srv) {
			add(dns.Question{Name: name, Qtype: dns.TypeSRV, Qclass: dns.ClassINET})
		}
	}
	for name, h := range c.hosts {
		for a, r := range h.addrs {
			if due(r) {
				t := dns.TypeAAAA
				if a.Is4() {
					t = dns.TypeA
				}
				add(dns.Question{Name: name, Qtype: t, Qclass: dns.ClassINET})
			}
		}
	}
	slices.SortFunc(qs, func(a, b dns.Question) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return int(a.Qtype) - int(b.Qtype)
	})
	return qs
}
