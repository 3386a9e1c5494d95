package vrrp

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Instance is one of our VRRP instances, as the rendered keepalived
// configuration will claim it: one VRID and the VIPs of one address family.
type Instance struct {
	Name string
	VRID uint8
	V6   bool
	// VIPs are the addresses its adverts carry (keepalived's
	// virtual_ipaddress): what a router using its VRID must list, no
	// more and no fewer.
	VIPs []netip.Addr
	// Excluded are addresses it holds too but leaves out of its adverts
	// (virtual_ipaddress_excluded: a Services group's addresses past the
	// first of each family): no other router may advertise them under
	// another VRID, but none of ours lists them.
	Excluded []netip.Addr
}

// holds says whether in holds a, advertised or not.
func (in Instance) holds(a netip.Addr) bool { return contains(in.VIPs, a) || contains(in.Excluded, a) }

// Observation is an advertisement seen on the link and who sent it: its IP
// source and the frame's link-layer source (zero when not known).
type Observation struct {
	Source netip.Addr
	MAC    MAC
	Advert Advert
	// Omitted counts the advert's addresses left out of Advert.Addresses
	// (see Trim): none of them is a VIP of the cluster.
	Omitted int
}

// ConflictKind says how another router's adverts clash with our instances.
type ConflictKind int

const (
	// ForeignAddresses: another router uses our VRID for other addresses. Both
	// would fight for mastership (the OpenShift symptom: "received an invalid
	// passwd" or a VIP that never comes up).
	ForeignAddresses ConflictKind = iota + 1
	// VIPUnderOtherID: another router advertises one of our VIPs under
	// another VRID: the VIP would be on two hosts at once.
	VIPUnderOtherID
	// UnknownPeer: our VRID and our VIPs from an address that is not a known
	// cluster node: an unregistered or stale node that can take the VIP.
	UnknownPeer
)

func (k ConflictKind) String() string {
	switch k {
	case ForeignAddresses:
		return "foreign-addresses"
	case VIPUnderOtherID:
		return "vip-under-other-id"
	case UnknownPeer:
		return "unknown-peer"
	}
	return fmt.Sprintf("kind-%d", int(k))
}

// Conflict is one clash between an observed router and one of our instances.
type Conflict struct {
	Kind     ConflictKind
	Instance string
	// VRID is the ID the other router used.
	VRID      uint8
	Source    netip.Addr
	Addresses []netip.Addr
	// Omitted counts the other router's addresses not listed.
	Omitted int
}

func (c Conflict) String() string {
	more := ""
	if c.Omitted > 0 {
		more = fmt.Sprintf(" (+%d more)", c.Omitted)
	}
	return fmt.Sprintf("%s: instance %s: router %s uses vrid %d for %v%s", c.Kind, c.Instance, c.Source, c.VRID, c.Addresses, more)
}

// Detect compares what was seen on the link with our instances. self are this
// node's own addresses (its adverts loop back and are ignored); peers are the
// known cluster nodes, and when empty the UnknownPeer check is skipped, since
// in multicast mode without the API nothing says who belongs. IPv6 adverts come
// from link-local sources that Node objects do not list, so they are never
// judged as unknown peers. The result is
// sorted and has one entry per (kind, instance, source, vrid).
func Detect(ours []Instance, self, peers []netip.Addr, seen []Observation) []Conflict {
	var out []Conflict
	for _, o := range seen {
		src := o.Source.Unmap()
		if slices.Contains(self, src) {
			continue
		}
		addrs := globalAddrs(o.Advert.Addresses)
		for _, in := range ours {
			if in.V6 != src.Is6() {
				continue
			}
			var kind ConflictKind
			switch {
			case o.Advert.VRID == in.VRID && (o.Omitted > 0 || !sameSet(addrs, in.VIPs)):
				kind = ForeignAddresses
			case o.Advert.VRID != in.VRID && slices.ContainsFunc(addrs, in.holds):
				kind = VIPUnderOtherID
			case o.Advert.VRID == in.VRID && len(peers) > 0 && !src.IsLinkLocalUnicast() && !slices.Contains(peers, src):
				kind = UnknownPeer
			default:
				continue
			}
			out = append(out, Conflict{Kind: kind, Instance: in.Name, VRID: o.Advert.VRID, Source: src, Addresses: addrs, Omitted: o.Omitted})
		}
	}
	slices.SortFunc(out, func(a, b Conflict) int {
		return cmp.Or(cmp.Compare(a.Instance, b.Instance), cmp.Compare(a.Kind, b.Kind),
			a.Source.Compare(b.Source), cmp.Compare(a.VRID, b.VRID))
	})
	return slices.CompactFunc(out, func(a, b Conflict) bool {
		return a.Instance == b.Instance && a.Kind == b.Kind && a.Source == b.Source && a.VRID == b.VRID
	})
}

// globalAddrs drops link-local addresses: an IPv6 advert may carry the
// router's link-local address first (RFC 5798 §5.2.9), which is no VIP.
func globalAddrs(in []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(in))
	for _, a := range in {
		if !a.IsLinkLocalUnicast() {
			out = append(out, a.Unmap())
		}
	}
	return out
}

func sameSet(a, b []netip.Addr) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}
