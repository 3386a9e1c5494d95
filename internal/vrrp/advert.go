package vrrp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Protocol is VRRP's IP protocol number (IPv4 protocol, IPv6 next header).
const Protocol = 112

// Multicast groups adverts are sent to when not in unicast mode.
var (
	GroupV4 = netip.MustParseAddr("224.0.0.18")
	GroupV6 = netip.MustParseAddr("ff02::12")
)

const (
	typeAdvertisement = 1
	headerLen         = 8
	v2AuthLen         = 8
)

// Advert is one VRRP advertisement (RFC 3768 version 2 or RFC 5798 version 3).
type Advert struct {
	Version  int
	VRID     uint8
	Priority uint8
	// Interval is the advertisement interval: whole seconds in v2,
	// centiseconds in v3.
	Interval time.Duration
	// AuthType is the v2 authentication type (0 none, 1 simple text); always 0 in v3.
	AuthType uint8
	// Addresses are the virtual addresses the sender claims, in wire order.
	Addresses []netip.Addr
}

// Parse errors. Callers count them by kind; none of them is fatal for a listener.
var (
	ErrShort    = errors.New("vrrp: packet too short")
	ErrVersion  = errors.New("vrrp: unsupported version")
	ErrType     = errors.New("vrrp: not an advertisement")
	ErrChecksum = errors.New("vrrp: bad checksum")
	ErrNotVRRP  = errors.New("vrrp: not a vrrp packet")
)

// ParseAdvert decodes a VRRP message (the IP payload). v6 selects the address
// size. When src and dst are valid the checksum is verified: v2 over the
// message alone; v3 with the pseudo-header of RFC 5798, or, for IPv4, without
// it, because keepalived's vrrp_v3_checksum_as_v2 and older routers send that.
func ParseAdvert(b []byte, v6 bool, src, dst netip.Addr) (Advert, error) {
	return parseAdvert(b, v6, src, dst, nil)
}

// parseAdvert is ParseAdvert with the addresses appended to addrs[:0]: a
// reader passes the same array for every packet, so a flood of adverts
// listing 255 addresses each allocates nothing per packet.
func parseAdvert(b []byte, v6 bool, src, dst netip.Addr, addrs []netip.Addr) (Advert, error) {
	if len(b) < headerLen {
		return Advert{}, ErrShort
	}
	a := Advert{
		Version:  int(b[0] >> 4),
		VRID:     b[1],
		Priority: b[2],
	}
	if b[0]&0x0f != typeAdvertisement {
		return Advert{}, fmt.Errorf("%w: type %d", ErrType, b[0]&0x0f)
	}
	count := int(b[3])
	alen := 4
	if v6 {
		alen = 16
	}
	need := headerLen + count*alen
	switch a.Version {
	case 2:
		a.AuthType = b[4]
		a.Interval = time.Duration(b[5]) * time.Second
		if !v6 {
			// The v2 authentication data follows the addresses (IPv4 only).
			need += v2AuthLen
		}
	case 3:
		a.Interval = time.Duration(binary.BigEndian.Uint16(b[4:6])&0x0fff) * 10 * time.Millisecond
	default:
		return Advert{}, fmt.Errorf("%w: %d", ErrVersion, a.Version)
	}
	if len(b) < need {
		return Advert{}, fmt.Errorf("%w: %d bytes for %d addresses, need %d", ErrShort, len(b), count, need)
	}
	if src.IsValid() && dst.IsValid() && !checksumOK(b[:need], a.Version, src, dst) {
		return Advert{}, ErrChecksum
	}
	a.Addresses = addrs[:0]
	if a.Addresses == nil {
		a.Addresses = make([]netip.Addr, 0, count)
	}
	for i := 0; i < count; i++ {
		off := headerLen + i*alen
		if v6 {
			a.Addresses = append(a.Addresses, netip.AddrFrom16([16]byte(b[off:off+16])))
		} else {
			a.Addresses = append(a.Addresses, netip.AddrFrom4([4]byte(b[off:off+4])))
		}
	}
	return a, nil
}

// ParsePacket decodes a whole IPv4 or IPv6 datagram carrying a VRRP
// advert, from its IP header on (a packet socket's SOCK_DGRAM read), and
// enforces RFC 3768/5798's TTL or hop limit of 255, which proves the sender
// is on the link. An IPv4 fragment or an IPv6 packet whose first next
// header is not VRRP is refused: VRRP adverts are never fragmented and
// carry no extension headers (keepalived sends none).
func ParsePacket(p []byte) (src, dst netip.Addr, a Advert, err error) {
	return parsePacket(p, nil)
}

// parsePacket is ParsePacket with parseAdvert's addrs.
func parsePacket(p []byte, addrs []netip.Addr) (src, dst netip.Addr, a Advert, err error) {
	if len(p) == 0 {
		return src, dst, a, ErrShort
	}
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return src, dst, a, ErrShort
		}
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if ihl < 20 || total < ihl || len(p) < total {
			return src, dst, a, ErrShort
		}
		if p[9] != Protocol {
			return src, dst, a, fmt.Errorf("%w: protocol %d", ErrNotVRRP, p[9])
		}
		if binary.BigEndian.Uint16(p[6:8])&0x3fff != 0 {
			return src, dst, a, fmt.Errorf("%w: a fragment", ErrNotVRRP)
		}
		src = netip.AddrFrom4([4]byte(p[12:16]))
		dst = netip.AddrFrom4([4]byte(p[16:20]))
		if p[8] != 255 {
			return src, dst, a, fmt.Errorf("%w: ttl %d", ErrNotVRRP, p[8])
		}
		a, err = parseAdvert(p[ihl:total], false, src, dst, addrs)
		return src, dst, a, err
	case 6:
		if len(p) < ipv6HdrLen {
			return src, dst, a, ErrShort
		}
		total := ipv6HdrLen + int(binary.BigEndian.Uint16(p[4:6]))
		if len(p) < total {
			return src, dst, a, ErrShort
		}
		if p[6] != Protocol {
			return src, dst, a, fmt.Errorf("%w: next header %d", ErrNotVRRP, p[6])
		}
		src = netip.AddrFrom16([16]byte(p[8:24]))
		dst = netip.AddrFrom16([16]byte(p[24:40]))
		if p[7] != 255 {
			return src, dst, a, fmt.Errorf("%w: hop limit %d", ErrNotVRRP, p[7])
		}
		a, err = parseAdvert(p[ipv6HdrLen:total], true, src, dst, addrs)
		return src, dst, a, err
	}
	return src, dst, a, fmt.Errorf("%w: ip version %d", ErrNotVRRP, p[0]>>4)
}

// Marshal encodes the advertisement, with the checksum computed for src and
// dst (v3) as keepalived does by default. It exists for tests and fuzzing, and
// for a prober that wants to look like a router.
func (a Advert) Marshal(src, dst netip.Addr) ([]byte, error) {
	v6 := src.Is6() && !src.Is4In6()
	alen := 4
	if v6 {
		alen = 16
	}
	if len(a.Addresses) > 255 {
		return nil, fmt.Errorf("vrrp: %d addresses, at most 255", len(a.Addresses))
	}
	n := headerLen + len(a.Addresses)*alen
	if a.Version == 2 && !v6 {
		n += v2AuthLen
	}
	b := make([]byte, n)
	b[0] = byte(a.Version)<<4 | typeAdvertisement
	b[1] = a.VRID
	b[2] = a.Priority
	b[3] = byte(len(a.Addresses))
	switch a.Version {
	case 2:
		b[4] = a.AuthType
		b[5] = byte(a.Interval / time.Second)
	case 3:
		binary.BigEndian.PutUint16(b[4:6], uint16(a.Interval/(10*time.Millisecond))&0x0fff)
	default:
		return nil, fmt.Errorf("%w: %d", ErrVersion, a.Version)
	}
	for i, ad := range a.Addresses {
		if ad.Is6() != v6 {
			return nil, fmt.Errorf("vrrp: address %s is not of the sender's family", ad)
		}
		s := ad.AsSlice()
		copy(b[headerLen+i*alen:], s)
	}
	binary.BigEndian.PutUint16(b[6:8], checksum(b, a.Version, src, dst, true))
	return b, nil
}

func checksumOK(b []byte, version int, src, dst netip.Addr) bool {
	if checksum(b, version, src, dst, true) == 0 {
		return true
	}
	// IPv4 v3 without the pseudo-header (see ParseAdvert).
	return version == 3 && src.Is4() && checksum(b, version, src, dst, false) == 0
}

// checksum is the Internet checksum over b, preceded for v3 (when pseudo is
// set) by the IPv4 or IPv6 pseudo-header. Over a message that holds its
// checksum it yields 0; over one with a zero checksum field, the value to put in.
func checksum(b []byte, version int, src, dst netip.Addr, pseudo bool) uint16 {
	var sum uint32
	add := func(p []byte) {
		for i := 0; i+1 < len(p); i += 2 {
			sum += uint32(p[i])<<8 | uint32(p[i+1])
		}
		if len(p)%2 == 1 {
			sum += uint32(p[len(p)-1]) << 8
		}
	}
	if version == 3 && pseudo {
		s, d := src.AsSlice(), dst.AsSlice()
		add(s)
		add(d)
		// Both pseudo-headers end in the protocol and the length, which fits
		// 16 bits here; the zero bytes around them add nothing.
		sum += Protocol + uint32(len(b))
	}
	add(b)
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
