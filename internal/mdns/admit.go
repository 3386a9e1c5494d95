package mdns

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Filter says which announcements a resolver keeps.
type Filter struct {
	// Cluster, when set, keeps only instances whose TXT "cluster" is exactly
	// this, or, without that key, whose instance label's first word is this
	// (OpenShift's "<cluster> Workstation-<host>").
	Cluster string
	// Service is the service type name browsed, "_workstation._tcp.local.".
	Service string
	// Reserved host labels are never cached.
	Reserved []string
	// Exclude are addresses never cached for any host: the cluster's VIPs,
	// which keepalived moves between nodes and which a node's name must not
	// point at (the publisher leaves them out with --exclude-address).
	Exclude []netip.Addr
}

// Domain returns the mDNS domain of the browsed service ("local.").
func (f Filter) Domain() string {
	s := f.Service
	for range 2 { // skip "_service." and "_proto."
		if i := strings.IndexByte(s, '.'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}

// Reasons an announcement is rejected; they are metric label values.
const (
	ReasonName      = "name"      // host name is not a single valid label in the domain
	ReasonReserved  = "reserved"  // host label owned by another plugin
	ReasonCluster   = "cluster"   // another cluster's instance
	ReasonConflict  = "conflict"  // a second claimant for a live name
	ReasonUnsigned  = "unsigned"  // key configured, no signature
	ReasonSignature = "signature" // bad or malformed signature
	ReasonStale     = "stale"     // timestamp outside the window
	ReasonReplay    = "replay"    // nonce or timestamp already seen
	ReasonFull      = "full"      // cache limit reached
	ReasonLimit     = "limit"     // the sender's limit of instances reached (MaxSourceInstances)
)

// Reasons lists every rejection reason, for metrics initialisation.
var Reasons = []string{ReasonName, ReasonReserved, ReasonCluster, ReasonConflict, ReasonUnsigned, ReasonSignature, ReasonStale, ReasonReplay, ReasonFull, ReasonLimit}

// Reasons an address record of an accepted announcement is dropped; they are
// metric label values.
const (
	DropHostLimit   = "host_limit"   // the host has MaxHostAddrs addresses
	DropSourceLimit = "source_limit" // the sender holds MaxSourceAddrs addresses
	DropFull        = "full"         // the cache holds MaxAddrs addresses
	DropVIP         = "vip"          // a VIP (Filter.Exclude)
)

// DropReasons lists every drop reason, for metrics initialisation.
var DropReasons = []string{DropHostLimit, DropSourceLimit, DropFull, DropVIP}

func reasonOf(err error) string {
	switch {
	case errors.Is(err, ErrUnsigned):
		return ReasonUnsigned
	case errors.Is(err, ErrStale):
		return ReasonStale
	case errors.Is(err, ErrReplay):
		return ReasonReplay
	}
	return ReasonSignature
}

// Result is what one received message did to the cache.
type Result struct {
	Accepted int
	Rejected map[string]int
	// Dropped counts the address records left out of accepted
	// announcements, by Drop reason.
	Dropped map[string]int
	// TTLCapped counts the records whose TTL was lowered to MaxTTL.
	TTLCapped int
	// Changed reports whether what is served (Heard) changed: a record
	// repeated as it is, which is most of what a link carries, changes
	// nothing, so a Browser does not rebuild its answers for it.
	Changed bool
	// Query are questions the resolver should ask now: the addresses of a
	// host it has an instance for but no address, an instance seen by PTR only.
	Query []dns.Question
}

func (r *Result) reject(reason string) {
	if r.Rejected == nil {
		r.Rejected = map[string]int{}
	}
	r.Rejected[reason]++
}

func (r *Result) drop(reason string, n int) {
	if n == 0 {
		return
	}
	if r.Dropped == nil {
		r.Dropped = map[string]int{}
	}
	r.Dropped[reason] += n
}

// withoutExcluded returns rrs without the records of excluded addresses, and
// counts those.
func (c *Cache) withoutExcluded(rrs []dns.RR, res *Result) []dns.RR {
	if len(c.filter.Exclude) == 0 {
		return rrs
	}
	out := rrs[:0:0]
	for _, rr := range rrs {
		if a, _ := addrOf(rr); slices.Contains(c.filter.Exclude, a) {
			res.drop(DropVIP, 1)
			continue
		}
		out = append(out, rr)
	}
	return out
}

// packet is one message's records of interest, grouped by owner.
type packet struct {
	ptr   map[string]uint32 // instance → TTL
	srv   map[string]*dns.SRV
	txt   map[string]*dns.TXT
	addrs map[string][]dns.RR
	order []string // instance names in first-seen order, for determinism
}

func (c *Cache) split(m *dns.Msg) packet {
	p := packet{ptr: map[string]uint32{}, srv: map[string]*dns.SRV{}, txt: map[string]*dns.TXT{}, addrs: map[string][]dns.RR{}}
	suffix := "." + c.filter.Service
	see := func(name string) {
		if !slices.Contains(p.order, name) {
			p.order = append(p.order, name)
		}
	}
	for _, section := range [][]dns.RR{m.Answer, m.Extra} {
		for _, rr := range section {
			h := rr.Header()
			if h.Class&^classFlush != dns.ClassINET {
				continue
			}
			name := lower(h.Name)
			switch rr := rr.(type) {
			case *dns.PTR:
				if name == c.filter.Service && strings.HasSuffix(lower(rr.Ptr), suffix) {
					p.ptr[lower(rr.Ptr)] = h.Ttl
					see(lower(rr.Ptr))
				}
			case *dns.SRV:
				if strings.HasSuffix(name, suffix) {
					p.srv[name] = rr
					see(name)
				}
			case *dns.TXT:
				if strings.HasSuffix(name, suffix) {
					p.txt[name] = rr
					see(name)
				}
			case *dns.A, *dns.AAAA:
				if _, ok := addrOf(rr); ok {
					p.addrs[name] = append(p.addrs[name], rr)
				}
			}
		}
	}
	return p
}

// clusterOK decides whether an instance belongs to the filter's cluster from
// its TXT fields (nil when unknown) and its label.
func (c *Cache) clusterOK(label string, fields map[string]string) bool {
	if c.filter.Cluster == "" {
		return true
	}
	if fields != nil {
		if v, ok := fields[txtCluster]; ok {
			return v == c.filter.Cluster
		}
	}
	first, _, _ := strings.Cut(label, " ")
	return first == c.filter.Cluster
}

// hostOK checks an SRV target: one valid label in the browsed domain, not reserved.
func (c *Cache) hostOK(target string) (string, string) {
	l, ok := HostLabel(target, c.filter.Domain())
	if !ok {
		return "", ReasonName
	}
	if slices.Contains(c.filter.Reserved, l) {
		return "", ReasonReserved
	}
	return l, ""
}

// Process applies a received mDNS response from src to the cache. The caller
// has checked that it is a response from port 5353 (RFC 6762 6).
func (c *Cache) Process(now time.Time, src netip.Addr, m *dns.Msg) Result {
	var res Result
	if m == nil || !m.Response {
		return res
	}
	src = src.Unmap().WithZone("")
	p := c.split(m)
	if c.verifier != nil {
		c.processSigned(now, src, p, &res)
	} else {
		c.processUnsigned(now, src, p, &res)
	}
	for inst, ttl := range p.ptr {
		if ttl == 0 {
			if in := c.instances[inst]; in != nil && in.hasSRV && (c.verifier == nil && in.sources[src]) {
				res.Changed = res.Changed || in.srv.served(now)
				in.srv.bye, in.srv.exp = true, minTime(in.srv.exp, now.Add(GoodbyeGrace))
			}
			continue
		}
		if _, inPacket := p.srv[inst]; !inPacket && c.instances[inst] == nil {
			res.Query = append(res.Query, dns.Question{Name: inst, Qtype: dns.TypeSRV, Qclass: dns.ClassINET}, dns.Question{Name: inst, Qtype: dns.TypeTXT, Qclass: dns.ClassINET})
		}
	}
	return res
}

func (c *Cache) processUnsigned(now time.Time, src netip.Addr, p packet, res *Result) {
	excluded := map[string]bool{}
	for _, name := range p.order {
		t := p.txt[name]
		if t == nil {
			continue
		}
		label, _ := splitFirst(name)
		fields := TXTFields(t.Txt)
		if !c.clusterOK(label, fields) {
			excluded[name] = true
			res.reject(ReasonCluster)
			continue
		}
		in := c.instances[name]
		if in == nil {
			var why string
			if in, why = c.newInstance(name, label, src); in == nil {
				res.reject(why)
				excluded[name] = true
				continue
			}
		}
		in.hasTXT = true
		in.cluster = fields[txtCluster]
		c.refresh(&in.txt, now, t.Hdr.Ttl, res) // not served itself: no change
	}
	for _, name := range p.order {
		s := p.srv[name]
		if s == nil || excluded[name] {
			continue
		}
		label, _ := splitFirst(name)
		in := c.instances[name]
		var fields map[string]string
		if in != nil && in.hasTXT && in.txt.live(now) {
			fields = map[string]string{txtCluster: in.cluster}
			if in.cluster == "" {
				fields = map[string]string{}
			}
		}
		if !c.clusterOK(label, fields) {
			res.reject(ReasonCluster)
			continue
		}
		target := lower(s.Target)
		if _, why := c.hostOK(target); why != "" {
			res.reject(why)
			continue
		}
		if in != nil && in.hasSRV && in.srv.served(now) && (in.target != target || s.Hdr.Ttl == 0) && !in.sources[src] {
			res.reject(ReasonConflict)
			continue
		}
		if in == nil {
			var why string
			if in, why = c.newInstance(name, label, src); in == nil {
				res.reject(why)
				continue
			}
		}
		if s.Hdr.Ttl == 0 {
			if in.hasSRV {
				res.Changed = res.Changed || in.srv.served(now)
				in.srv.bye, in.srv.exp = true, minTime(in.srv.exp, now.Add(GoodbyeGrace))
			}
		} else {
			if !in.hasSRV || !in.srv.served(now) {
				clear(in.sources) // a new claim: its sender is the owner now
				res.Changed = true
			}
			res.Changed = res.Changed || in.target != target
			in.sources[src] = true
			in.hasSRV, in.target = true, target
			c.refresh(&in.srv, now, s.Hdr.Ttl, res)
		}
		res.Accepted++
		if h := c.hosts[target]; (h == nil || !h.anyServed(now)) && s.Hdr.Ttl > 0 && len(p.addrs[target]) == 0 {
			res.Query = append(res.Query, dns.Question{Name: target, Qtype: dns.TypeA, Qclass: dns.ClassINET}, dns.Question{Name: target, Qtype: dns.TypeAAAA, Qclass: dns.ClassINET})
		}
	}
	hostNames := make([]string, 0, len(p.addrs))
	for h := range p.addrs {
		hostNames = append(hostNames, h)
	}
	slices.Sort(hostNames)
	for _, name := range hostNames {
		if !c.referenced(name, now) {
			continue // not a node of ours: never cached
		}
		rrs := c.withoutExcluded(p.addrs[name], res)
		if len(rrs) == 0 {
			continue
		}
		h := c.hosts[name]
		if h != nil && h.anyServed(now) && !h.sources[src] && !h.holds(src, now) && !h.same(rrs, now) {
			res.reject(ReasonConflict)
			continue
		}
		if h == nil {
			if len(c.hosts) >= MaxEntries {
				res.reject(ReasonFull)
				continue
			}
			h = &host{addrs: map[netip.Addr]*rec{}, sources: map[netip.Addr]bool{}}
			c.hosts[name] = h
		}
		flush := map[bool]bool{} // family (is4) → flush bit seen
		inPacket := map[netip.Addr]bool{}
		for _, rr := range rrs {
			a, _ := addrOf(rr)
			inPacket[a] = true
			if rr.Header().Class&classFlush != 0 {
				flush[a.Is4()] = true
			}
			r := h.addrs[a]
			if rr.Header().Ttl == 0 {
				if r != nil {
					res.Changed = res.Changed || r.served(now)
					r.bye, r.exp = true, minTime(r.exp, now.Add(GoodbyeGrace))
				}
				continue
			}
			if r == nil {
				var why string
				if r, why = c.newAddr(h, a, src); r == nil {
					res.drop(why, 1)
					continue
				}
			}
			res.Changed = res.Changed || !r.served(now) // new, or rescued from its goodbye
			c.refresh(r, now, rr.Header().Ttl, res)
		}
		// Cache flush (RFC 6762 10.2): older records of the same name and type
		// go one second after the first flushing record, so a multi-packet
		// announcement does not flush its own first packet.
		for a, r := range h.addrs {
			if flush[a.Is4()] && !inPacket[a] && r.recv.Before(now.Add(-GoodbyeGrace)) {
				r.exp = minTime(r.exp, now.Add(GoodbyeGrace))
			}
		}
		h.sources[src] = true
		res.Accepted++
	}
}

// processSigned accepts only complete, signed announcements: an instance's
// SRV and TXT with the signature over its host's addresses in the same packet.
func (c *Cache) processSigned(now time.Time, src netip.Addr, p packet, res *Result) {
	covered := map[string]bool{}
	for _, name := range p.order {
		s, t := p.srv[name], p.txt[name]
		if s == nil && t == nil {
			continue
		}
		if s != nil {
			// The instance's verdict, whatever it is, covers its host's
			// addresses in the packet: one announcement is counted once,
			// and a refused signed one is not "unsigned" as well.
			covered[lower(s.Target)] = true
		}
		if s == nil || t == nil {
			res.reject(ReasonUnsigned)
			continue
		}
		label, _ := splitFirst(name)
		fields := TXTFields(t.Txt)
		if !c.clusterOK(label, fields) {
			res.reject(ReasonCluster)
			continue
		}
		if _, ok := fields[txtCluster]; c.filter.Cluster != "" && !ok {
			res.reject(ReasonCluster)
			continue
		}
		target := lower(s.Target)
		if _, why := c.hostOK(target); why != "" {
			res.reject(why)
			continue
		}
		bye := s.Hdr.Ttl == 0
		var addrs []netip.Addr
		var addrTTL uint32
		for _, rr := range p.addrs[target] {
			a, _ := addrOf(rr)
			addrs = append(addrs, a)
			addrTTL = rr.Header().Ttl
			bye = bye && rr.Header().Ttl == 0
		}
		signed := Signed{Cluster: fields[txtCluster], Host: target, Addrs: addrs, Goodbye: bye}
		if err := c.verifier.Check(now, signed, fields); err != nil {
			if !errors.Is(err, ErrDuplicate) && !errors.Is(err, ErrSuperseded) { // no news: ignored
				res.reject(reasonOf(err))
			}
			continue
		}
		in := c.instances[name]
		h := c.hosts[target]
		if h == nil && len(c.hosts) >= MaxEntries {
			res.reject(ReasonFull)
			continue
		}
		if in == nil {
			var why string
			if in, why = c.newInstance(name, label, src); in == nil {
				res.reject(why)
				continue
			}
		}
		if h == nil {
			h = &host{addrs: map[netip.Addr]*rec{}, sources: map[netip.Addr]bool{}}
			c.hosts[target] = h
		}
		res.Accepted++
		if bye {
			res.Changed = res.Changed || in.srv.served(now) || h.anyServed(now)
			in.srv.bye, in.srv.exp = true, minTime(in.srv.exp, now.Add(GoodbyeGrace))
			for _, r := range h.addrs {
				r.bye, r.exp = true, minTime(r.exp, now.Add(GoodbyeGrace))
			}
			continue
		}
		// The signature vouches for the complete address set: replace at
		// once. A VIP in it is still never a node's address.
		if len(c.filter.Exclude) > 0 {
			n := len(addrs)
			addrs = slices.DeleteFunc(addrs, func(a netip.Addr) bool { return slices.Contains(c.filter.Exclude, a) })
			res.drop(DropVIP, n-len(addrs))
		}
		if !in.hasSRV || !in.srv.served(now) || in.target != target || !h.servesExactly(addrs, now) {
			res.Changed = true
		}
		in.hasSRV, in.hasTXT, in.target, in.cluster = true, true, target, fields[txtCluster]
		c.refresh(&in.srv, now, s.Hdr.Ttl, res)
		c.refresh(&in.txt, now, t.Hdr.Ttl, res)
		for a := range h.addrs {
			if !slices.Contains(addrs, a) {
				c.dropAddr(h, a)
			}
		}
		for _, a := range addrs {
			r := h.addrs[a]
			if r == nil {
				var why string
				if r, why = c.newAddr(h, a, src); r == nil {
					res.drop(why, 1)
					continue
				}
			}
			c.refresh(r, now, addrTTL, res)
		}
	}
	for name := range p.addrs {
		if !covered[name] && c.referenced(name, now) {
			res.reject(ReasonUnsigned)
		}
	}
}
