package vrrp

import (
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Link judges each VRRP advert heard on the node's link once, and passes
// it on to what may act on it. Anyone on the link can send adverts (VRRP v3
// has no authentication), with any source address, VRID and up to 255
// addresses each; what they may cost is therefore decided here, in one
// place:
//
//   - an advert that uses none of the cluster's router IDs and names none
//     of its VIPs is dropped (Unrelated);
//   - one that does goes to the Guard, trimmed to the cluster's VIPs and a
//     few others (what a conflict report needs): bounded whatever it lists;
//   - only an advert from a peer of one of this node's groups, for exactly
//     that group's VIPs under its router ID, reaches Heard and the relay's
//     live map (priority above 0) or the hand-over relay (priority 0, a
//     resignation). A peer is one of the group's node addresses (IPv4, or
//     an IPv6 global address), with the MAC the node's neighbour table has
//     for it when it has one; an IPv6 advert from a link-local address
//     counts when its frame comes from a peer's MAC.
//
// Safe for concurrent use; Observe is a Reader's Handle.
type Link struct {
	// Cluster are every instance the cluster's groups may run (lb.Instances):
	// what makes an advert worth the Guard's attention.
	Cluster []Instance
	Guard   *Guard
	Heard   *Heard
	// Resigned, when set, receives the peers' priority-0 adverts (the
	// hand-over relay's Observe).
	Resigned func(Observation)
	// Advertised, when set, receives the peers' other adverts (the relay's
	// Advertised).
	Advertised func(Observation)
	// Own says whether a source address is this node's.
	Own func(netip.Addr) bool
	// Neighbors lists the node's neighbour table on the link (address →
	// MACs): the kernel's (KernelNeighbors). Nil: no MAC is known, and
	// IPv6 adverts from link-local sources never count as a peer's.
	Neighbors func() map[netip.Addr][]MAC
	// Verdict, when set, is told what became of each advert (a metric).
	Verdict func(LinkVerdict)

	mu      sync.Mutex
	groups  []LinkGroup
	neigh   map[netip.Addr][]MAC
	neighAt time.Time
}

// LinkGroup is one of this node's VIP groups as the Link checks its peers'
// adverts: its router ID, its VIPs (both families) and the addresses of
// the group's other nodes.
type LinkGroup struct {
	VRID  uint8
	VIPs  []netip.Addr
	Peers []netip.Addr
}

// LinkVerdict is what the Link did with an advert.
type LinkVerdict int

const (
	// Unrelated: none of the cluster's router IDs or VIPs; dropped.
	Unrelated LinkVerdict = iota + 1
	// Other: about the cluster, but not a peer's advert for its group (a
	// clash, a stranger, a forgery, a peer for a group this node is not
	// in): the Guard's only.
	Other
	// Peer: a peer's advert for its group: also Heard's or the relay's.
	Peer
)

func (v LinkVerdict) String() string {
	switch v {
	case Unrelated:
		return "unrelated"
	case Other:
		return "other"
	case Peer:
		return "peer"
	}
	return "unknown"
}

// Bounds on what one advert may leave behind.
const (
	// maxOtherAddrs is how many addresses that are no VIP of the cluster a
	// trimmed advert keeps: enough to show what a clashing router claims.
	maxOtherAddrs = 4
	// neighborAge is how long a read of the neighbour table is used; a MAC
	// it lacks makes it read again, at most every neighborRetry.
	neighborAge   = time.Second
	neighborRetry = 200 * time.Millisecond
)

// SetGroups replaces this node's groups (from each new plan).
func (l *Link) SetGroups(groups []LinkGroup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.groups = groups
}

// Observe judges o, heard at now, and passes it on. Nothing keeps
// o.Advert.Addresses (a Reader reuses it): the guard keeps a trimmed copy.
func (l *Link) Observe(o Observation, now time.Time) {
	o.Source = o.Source.Unmap()
	v := l.judge(o, now)
	if l.Verdict != nil {
		l.Verdict(v)
	}
	if v == Unrelated {
		return
	}
	if l.Guard != nil {
		l.Guard.Observe(Trim(o, l.Cluster), now)
	}
	if v != Peer {
		return
	}
	if o.Advert.Priority == 0 && l.Resigned != nil {
		l.Resigned(o)
	}
	if o.Advert.Priority != 0 && l.Advertised != nil {
		l.Advertised(o)
	}
	// Resignations too: Heard.Latest leaves out a router that resigned.
	if l.Heard != nil {
		l.Heard.Observe(o, now)
	}
}

func (l *Link) judge(o Observation, now time.Time) LinkVerdict {
	if (l.Own != nil && l.Own(o.Source)) || !touches(o, l.Cluster) {
		return Unrelated
	}
	addrs := globalAddrs(o.Advert.Addresses)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, g := range l.groups {
		if g.VRID != o.Advert.VRID {
			continue
		}
		vips := ofFamily(g.VIPs, o.Source.Is6())
		// What keepalived itself accepts: exactly the group's VIPs.
		if len(vips) == 0 || len(addrs) != len(vips) || !sameSet(addrs, vips) {
			continue
		}
		if l.fromPeer(o, g.Peers, now) {
			return Peer
		}
	}
	return Other
}

// fromPeer says whether o's sender is one of peers. Called with l.mu held.
func (l *Link) fromPeer(o Observation, peers []netip.Addr, now time.Time) bool {
	if !o.Source.IsLinkLocalUnicast() {
		if !slices.Contains(peers, o.Source) {
			return false
		}
		// A peer's address from another MAC than the one the node talks
		// to is a forgery; without an entry the address alone decides.
		macs := l.neighbors(o.Source, now)
		return len(macs) == 0 || o.MAC == (MAC{}) || slices.Contains(macs, o.MAC)
	}
	if o.MAC == (MAC{}) {
		return false
	}
	isPeer := func() bool {
		for _, p := range peers {
			if slices.Contains(l.neigh[p], o.MAC) {
				return true
			}
		}
		return false
	}
	l.refresh(now, false)
	if isPeer() {
		return true
	}
	l.refresh(now, true)
	return isPeer()
}

// neighbors are the MACs the table has for a, read again once on a miss.
func (l *Link) neighbors(a netip.Addr, now time.Time) []MAC {
	l.refresh(now, false)
	if _, ok := l.neigh[a]; !ok {
		l.refresh(now, true)
	}
	return l.neigh[a]
}

// refresh reads the neighbour table when the last read is older than
// neighborAge, or (missed) neighborRetry: a flood of strangers' adverts
// costs at most a few reads a second.
func (l *Link) refresh(now time.Time, missed bool) {
	if l.Neighbors == nil {
		return
	}
	age := neighborAge
	if missed {
		age = neighborRetry
	}
	if l.neigh != nil && now.Sub(l.neighAt) < age {
		return
	}
	l.neigh, l.neighAt = l.Neighbors(), now
	if l.neigh == nil {
		l.neigh = map[netip.Addr][]MAC{}
	}
}

// touches says whether o uses one of the cluster's router IDs (in its
// family) or names one of its VIPs.
func touches(o Observation, cluster []Instance) bool {
	v6 := o.Source.Is6()
	for _, in := range cluster {
		if in.V6 == v6 && in.VRID == o.Advert.VRID {
			return true
		}
	}
	for _, a := range o.Advert.Addresses {
		for _, in := range cluster {
			if in.holds(a) {
				return true
			}
		}
	}
	return false
}

// Trim is o with its addresses cut to the cluster's VIPs it names (once
// each) and at most maxOtherAddrs others, in wire order; Omitted counts
// the others cut.
// What Detect decides about o is the same before and after.
func Trim(o Observation, cluster []Instance) Observation {
	ours := func(a netip.Addr) bool {
		return slices.ContainsFunc(cluster, func(in Instance) bool { return in.holds(a) })
	}
	in := o.Advert.Addresses
	out := make([]netip.Addr, 0, min(len(in), 8))
	others := 0
	for _, a := range in {
		switch {
		case ours(a):
			// Once each: a forged list may repeat a VIP 255 times (a
			// repeat changes no set Detect compares).
			if a = a.Unmap(); !slices.Contains(out, a) {
				out = append(out, a)
			}
		case others < maxOtherAddrs:
			others++
			out = append(out, a.Unmap())
		default:
			o.Omitted++
		}
	}
	o.Advert.Addresses = out
	return o
}

func ofFamily(as []netip.Addr, v6 bool) []netip.Addr {
	var out []netip.Addr
	for _, a := range as {
		if a = a.Unmap(); a.Is6() == v6 {
			out = append(out, a)
		}
	}
	return out
}
