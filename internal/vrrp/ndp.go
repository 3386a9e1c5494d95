package vrrp

import (
	"encoding/binary"
	"net/netip"
)

// ICMPv6 Neighbor Discovery (RFC 4861) as the split-brain check uses it:
// a Neighbor Advertisement says its sender has the target address, as an
// ARP reply does for IPv4.
const (
	icmp6NS         = 135
	icmp6NA         = 136
	ndOptSLLA       = 1
	ndOptTLLA       = 2
	ipv6HdrLen      = 40
	naFlagOverride  = 0x20000000
	naFlagSolicited = 0x40000000
)

// IPv6Packet is what the split-brain check reads from a Neighbor
// Advertisement seen on the link with its link-layer source: the sender
// has Target.
type IPv6Packet struct {
	Source netip.Addr
	Target netip.Addr
	// Solicited: an answer to a solicitation (a kernel answers those);
	// unset, the sender announces the address (keepalived, lbconfig).
	Solicited bool
}

// ParseIPv6 reads an IPv6 packet from its fixed header on (no link header):
// a Neighbor Advertisement with hop limit 255, as RFC 4861 requires of
// every accepted one. Anything else is refused.
func ParseIPv6(b []byte) (IPv6Packet, bool) {
	if len(b) < ipv6HdrLen || b[0]>>4 != 6 || b[6] != 58 {
		return IPv6Packet{}, false
	}
	m := b[ipv6HdrLen:]
	if len(m) < 24 || m[0] != icmp6NA || m[1] != 0 || b[7] != 255 {
		return IPv6Packet{}, false
	}
	t := netip.AddrFrom16([16]byte(m[8:24]))
	if t.IsMulticast() || t.IsUnspecified() {
		return IPv6Packet{}, false
	}
	return IPv6Packet{Source: netip.AddrFrom16([16]byte(b[8:24])), Target: t,
		Solicited: binary.BigEndian.Uint32(m[4:8])&naFlagSolicited != 0}, true
}

// NeighborSolicitation is the ICMPv6 message (checksum left 0: the kernel
// fills it in for ICMPv6 sockets) asking who has target, with our MAC.
func NeighborSolicitation(target netip.Addr, mac MAC) []byte {
	b := make([]byte, 32)
	b[0] = icmp6NS
	t := target.As16()
	copy(b[8:24], t[:])
	b[24], b[25] = ndOptSLLA, 1
	copy(b[26:32], mac[:])
	return b
}

// UnsolicitedAdvertisement is the ICMPv6 message announcing that mac has
// target (override set): IPv6's gratuitous ARP.
func UnsolicitedAdvertisement(target netip.Addr, mac MAC) []byte {
	b := make([]byte, 32)
	b[0] = icmp6NA
	binary.BigEndian.PutUint32(b[4:8], naFlagOverride)
	t := target.As16()
	copy(b[8:24], t[:])
	b[24], b[25] = ndOptTLLA, 1
	copy(b[26:32], mac[:])
	return b
}

// SolicitedNode is the multicast group a Neighbor Solicitation for a goes
// to (ff02::1:ffXX:XXXX).
func SolicitedNode(a netip.Addr) netip.Addr {
	s := a.As16()
	return netip.AddrFrom16([16]byte{0xff, 0x02, 10: 0, 11: 1, 12: 0xff, 13: s[13], 14: s[14], 15: s[15]})
}
