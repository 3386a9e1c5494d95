package mdns

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// Limits of the cache. Unsigned mDNS (the default) lets any host on the link
// announce anything, so every dimension a sender controls is bounded: the
// number of names, the addresses of a name, what one sender may hold, and how
// long it stays. A real node never comes near any of them. One sender at its
// limits makes the cache hold about 2 MiB; the whole cache at its limits,
// which takes thousands of forged source addresses, about 16 MiB.
const (
	// MaxEntries bounds the instances and the hosts (each) of the whole cache.
	MaxEntries = 8192
	// MaxAddrs bounds the address records of the whole cache: four per
	// host at MaxEntries hosts, where a node has one or two per family.
	MaxAddrs = 4 * MaxEntries
	// MaxHostAddrs bounds the addresses of one host name. A node announces
	// a handful (an IPv4 and an IPv6 address, a second address during a
	// migration, link-local ones with --link-local); 16 still holds two
	// complete sets of 8 while a renumbered node's flushed addresses wait
	// out their last second (RFC 6762 10.2). More is a flood: without this
	// cap one name answered with 4,092 addresses.
	MaxHostAddrs = 16
	// MaxSourceInstances and MaxSourceAddrs bound what one sender (one
	// source address) holds, so that it cannot fill the cache limits above
	// and lock out the nodes that come after it. A node is one instance and
	// a handful of addresses per source; the limits leave room for a test
	// fixture or proxy announcing a few hundred nodes from one address
	// (test/bench/mdnsflood announces 500, with 1,000 addresses).
	MaxSourceInstances = 1024
	MaxSourceAddrs     = 4096
	// MaxTTL caps every received TTL. RFC 6762 10 recommends 120 s for
	// records with a host name or address and 75 minutes (4500 s) for the
	// others; no responder has a reason to announce longer, and a record
	// with the wire's 0xffffffff (136 years) would stay cached long after
	// its sender left, its first refresh query a century away.
	MaxTTL = ServiceTTL
)

// rec is one cached record's clock: kept per record, not per name, because
// RFC 6762 expires, flushes and refreshes each record on its own.
type rec struct {
	src    netip.Addr // the sender it counts against (usage)
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
	creator netip.Addr // the sender it counts against (usage)
}

type host struct {
	addrs   map[netip.Addr]*rec
	sources map[netip.Addr]bool // as instance.sources
}

// usage is what one sender holds in the cache.
type usage struct{ instances, addrs int }

// Cache is a resolver's memory of the announcements it heard. It is not safe
// for concurrent use: one goroutine feeds it and publishes Heard snapshots.
type Cache struct {
	filter    Filter
	verifier  *Verifier
	rand      func() float64
	instances map[string]*instance // lower-case instance name
	hosts     map[string]*host     // lower-case host name
	addrs     int                  // address records of all hosts
	bySource  map[netip.Addr]*usage
}

// NewCache returns an empty cache; verifier nil accepts unsigned announcements.
func NewCache(f Filter, v *Verifier) *Cache {
	f.Service = lower(dns.Fqdn(f.Service))
	return &Cache{filter: f, verifier: v, rand: rand.Float64, instances: map[string]*instance{}, hosts: map[string]*host{}, bySource: map[netip.Addr]*usage{}}
}

// refresh restarts r as heard at now: its TTL (at most MaxTTL) counts from
// now and its refresh queries start over, with a jitter of its own so that
// the resolvers of a link do not all ask at the same moment.
func (c *Cache) refresh(r *rec, now time.Time, ttl uint32, res *Result) {
	if ttl > MaxTTL {
		ttl = MaxTTL
		res.TTLCapped++
	}
	*r = rec{src: r.src, recv: now, exp: now.Add(time.Duration(ttl) * time.Second), ttl: ttl, jitter: c.rand() * 0.02}
}

func (c *Cache) usage(src netip.Addr) *usage {
	u := c.bySource[src]
	if u == nil {
		u = &usage{}
		c.bySource[src] = u
	}
	return u
}

// release forgets a sender that holds nothing any more, so senders that come
// and go (or forged source addresses) do not pile up.
func (c *Cache) release(src netip.Addr, u *usage) {
	if u.instances == 0 && u.addrs == 0 {
		delete(c.bySource, src)
	}
}

// newInstance adds an instance that src announced, or says why not (a
// rejection reason).
func (c *Cache) newInstance(name, label string, src netip.Addr) (*instance, string) {
	if len(c.instances) >= MaxEntries {
		return nil, ReasonFull
	}
	u := c.usage(src)
	if u.instances >= MaxSourceInstances {
		c.release(src, u)
		return nil, ReasonLimit
	}
	u.instances++
	in := &instance{label: label, sources: map[netip.Addr]bool{}, creator: src}
	c.instances[name] = in
	return in, ""
}

func (c *Cache) dropInstance(name string, in *instance) {
	delete(c.instances, name)
	if u := c.bySource[in.creator]; u != nil {
		u.instances--
		c.release(in.creator, u)
	}
}

// newAddr adds address a that src announced to h, or says why not (a Drop
// reason). The host's own limit comes first: it is the one a sender that
// floods one name hits.
func (c *Cache) newAddr(h *host, a, src netip.Addr) (*rec, string) {
	if len(h.addrs) >= MaxHostAddrs {
		return nil, DropHostLimit
	}
	if c.addrs >= MaxAddrs {
		return nil, DropFull
	}
	u := c.usage(src)
	if u.addrs >= MaxSourceAddrs {
		c.release(src, u)
		return nil, DropSourceLimit
	}
	u.addrs++
	c.addrs++
	r := &rec{src: src}
	h.addrs[a] = r
	return r, ""
}

func (c *Cache) dropAddr(h *host, a netip.Addr) {
	r := h.addrs[a]
	if r == nil {
		return
	}
	delete(h.addrs, a)
	c.addrs--
	if u := c.bySource[r.src]; u != nil {
		u.addrs--
		c.release(r.src, u)
	}
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
	addrs := make([]netip.Addr, 0, len(rrs))
	for _, rr := range rrs {
		if rr.Header().Ttl == 0 {
			return false
		}
		a, _ := addrOf(rr)
		addrs = append(addrs, a)
	}
	return h.servesExactly(addrs, now)
}

// servesExactly reports whether addrs (repeats allowed) are the addresses
// served for h, no more and no fewer.
func (h *host) servesExactly(addrs []netip.Addr, now time.Time) bool {
	n := 0
	for i, a := range addrs {
		if slices.Contains(addrs[:i], a) {
			continue
		}
		if !h.holds(a, now) {
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

// Expire drops what has expired and reports whether that may have changed
// what is served: not when only records that said goodbye (no longer served)
// or TXT records (never served) go.
func (c *Cache) Expire(now time.Time) bool {
	changed := false
	for name, in := range c.instances {
		if in.hasSRV && !in.srv.live(now) {
			in.hasSRV, changed = false, changed || !in.srv.bye
		}
		if in.hasTXT && !in.txt.live(now) {
			in.hasTXT = false
		}
		if !in.hasSRV && !in.hasTXT {
			c.dropInstance(name, in)
		}
	}
	for name, h := range c.hosts {
		for a, r := range h.addrs {
			if !r.live(now) {
				changed = changed || !r.bye
				c.dropAddr(h, a)
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
