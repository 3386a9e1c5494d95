package authority

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/coredns/coredns/plugin/metrics"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Query is the question of a request as the members compare it. It is built
// once per query without allocating (unless the name has upper-case letters),
// where request.Request would lower-case, escape and copy the name again in
// every member.
type Query struct {
	Name  string // lower case: what the members' indexes hold
	QName string // as asked: answers keep the question's case
	Type  uint16
	Class uint16
}

// NewQuery returns the query of r; ok is false when r has no question.
func NewQuery(r *dns.Msg) (q Query, ok bool) {
	if len(r.Question) == 0 {
		return Query{}, false
	}
	q0 := &r.Question[0]
	return Query{Name: lowerASCII(q0.Name), QName: q0.Name, Type: q0.Qtype, Class: q0.Qclass}, true
}

// lowerASCII lower-cases the ASCII letters of s, returning s itself when it has
// none. Names from the wire are escaped ASCII, so nothing else needs folding
// (DNS compares names case-insensitively in ASCII only, RFC 4343).
func lowerASCII(s string) string {
	i := 0
	for ; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			break
		}
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if c := b[i]; 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Match returns the member's zone that holds name (lower case, fully
// qualified): the longest one, or "" when none does.
func (a *Authority) Match(name string) string { return matchZone(a.origins, name) }

// matchZone is plugin.Zones.Matches without its allocations; zones must be
// sorted longest first, so the first hit is the most specific zone.
func matchZone(zones []string, name string) string {
	for _, z := range zones {
		if name == z || IsBelow(name, z) {
			return z
		}
	}
	return ""
}

func longestFirst(zones []string) []string {
	s := slices.Clone(zones)
	slices.SortStableFunc(s, func(x, y string) int { return len(y) - len(x) })
	return s
}

// Counter is a requests_total{server,result} counter vector that looks each
// label pair up once: CounterVec.WithLabelValues hashes and locks on every
// call, which costs as much as the rest of an answer.
type Counter struct {
	vec *prometheus.CounterVec
	mu  sync.Mutex
	m   atomic.Pointer[map[counterKey]prometheus.Counter]
}

type counterKey struct {
	server string
	result Result
}

// NewCounter wraps vec, whose labels must be server and result.
func NewCounter(vec *prometheus.CounterVec) *Counter { return &Counter{vec: vec} }

// Inc counts one query of the server in ctx with result res.
func (c *Counter) Inc(ctx context.Context, res Result) {
	k := counterKey{metrics.WithServer(ctx), res}
	if m := c.m.Load(); m != nil {
		if ctr, ok := (*m)[k]; ok {
			ctr.Inc()
			return
		}
	}
	c.add(k).Inc()
}

// add copies the map with k added: pairs are few (servers × results) and fixed
// after the first queries, so readers never lock.
func (c *Counter) add(k counterKey) prometheus.Counter {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if ctr, ok := (*old)[k]; ok {
			return ctr
		}
	}
	m := make(map[counterKey]prometheus.Counter, 8)
	if old != nil {
		for key, v := range *old {
			m[key] = v
		}
	}
	ctr := c.vec.WithLabelValues(k.server, string(k.result))
	m[k] = ctr
	c.m.Store(&m)
	return ctr
}
