package mdns

import (
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// MaxEntries bounds the cache (hosts and instances each): a flood of names
// cannot grow a resolver's memory without bound.
const MaxEntries = 8192

// rec is one cached record's clock: kept per record, not per name, because
// RFC 6762 expires, flushes and refreshes each record on its own.
type rec struct {
	recv   time.Time
	exp    time.Time
	ttl    uint32
	bye    bool // in its goodbye grace second: kept for rescue, not served
	stage  int  // next refreshAt index
	jitter float64
}

func (r *rec) live(now time.Time) bool { return now.Before(r.exp) }

func (r *rec) served(now time.Time) bool { return !r.bye && r.live(now) }

type instance struct {
	label   string // unescaped instance label
	target  string // SRV target, lower case
	hasSRV  bool
	srv     rec
	txt     rec
	hasTXT  bool
	cluster string // TXT cluster value
	// sources are the senders of the current claim: unsigned, the sender is
	// all that tells the owner from a rival, so only they may change it
	// while it is served.
	sources map[netip.Addr]bool
}

type host struct {
	addrs   map[netip.Addr]*rec
	sources map[netip.Addr]bool // as instance.sources
}

// Cache is a resolver's memory of the announcements it heard. It is not safe
// for concurrent use: one goroutine feeds it and publishes Heard snapshots.
type Cache struct {
	filter    Filter
	verifier  *Verifier
	rand      func() float64
	instances map[string]*instance // lower-case instance name
	hosts     map[string]*host     // lower-case host name
}

// NewCache returns an empty cache; verifier nil accepts unsigned announcements.
func NewCache(f Filter, v *Verifier) *Cache {
	f.Service = lower(dns.Fqdn(f.Service))
	return &Cache{filter: f, verifier: v, rand: rand.Float64, instances: map[string]*instance{}, hosts: map[string]*host{}}
}

// refresh restarts r as heard at now: its TTL counts from now and its
// refresh queries start over, with a jitter of its own so that the resolvers
// of a link do not all ask at the same moment.
func (c *Cache) refresh(r *rec, now time.Time, ttl uint32) {
	*r = rec{recv: now, exp: now.Add(time.Duration(ttl) * time.Second), ttl: ttl, jitter: c.rand() * 0.02}
}

// referenced reports whether a live instance of ours (even one saying
// goodbye, whose host's goodbyes must apply too) points at host.
func (c *Cache) referenced(host string, now time.Time) bool {
	for _, in := range c.instances {
		if in.hasSRV && in.target == host && in.srv.live(now) {
			return true
		}
	}
	return false
}

func (h *host) anyServed(now time.Time) bool {
	for _, r := range h.addrs {
		if r.served(now) {
			return true
		}
	}
	return false
}

// same reports whether rrs repeat exactly the addresses served for h: the
// same data from another sender (a host's other family, whose IPv6 source is
// link-local) is no conflict (RFC 6762 9).
func (h *host) same(rrs []dns.RR, now time.Time) bool {
	n := 0
	for _, rr := range rrs {
		a, _ := addrOf(rr)
		if rr.Header().Ttl == 0 || !h.holds(a, now) {
			return false
		}
		n++
	}
	served := 0
	for _, r := range h.addrs {
		if r.served(now) {
			served++
		}
	}
	return n == served
}

func (h *host) holds(a netip.Addr, now time.Time) bool {
	r := h.addrs[a]
	return r != nil && r.served(now)
}

// Expire drops what has expired and reports whether anything was dropped.
func (c *Cache) Expire(now time.Time) bool {
	changed := false
	for name, in := range c.instances {
		if in.hasSRV && !in.srv.live(now) {
			in.hasSRV, changed = false, true
		}
		if in.hasTXT && !in.txt.live(now) {
			in.hasTXT, changed = false, true
		}
		if !in.hasSRV && !in.hasTXT {
			delete(c.instances, name)
		}
	}
	for name, h := range c.hosts {
		for a, r := range h.addrs {
			if !r.live(now) {
				delete(h.addrs, a)
				changed = true
			}
		}
		if len(h.addrs) == 0 {
			delete(c.hosts, name)
		}
	}
	return changed
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
