package vrrp

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// ARP over Ethernet for IPv4 (RFC 826): the 28 bytes after the link header.
const (
	arpLen     = 28
	arpRequest = 1
	arpReply   = 2
)

// ARPPacket is the part of an ARP packet the split-brain check reads: who
// says it has which address.
type ARPPacket struct {
	Op             uint16
	SenderMAC      MAC
	SenderIP       netip.Addr
	TargetIP       netip.Addr
	TargetMAC      MAC
	GratuitousLike bool // sender and target address are the same
}

// ParseARP reads an Ethernet/IPv4 ARP packet (no link header); anything
// else, short or not, is refused.
func ParseARP(b []byte) (ARPPacket, bool) {
	if len(b) < arpLen || binary.BigEndian.Uint16(b[0:2]) != 1 || binary.BigEndian.Uint16(b[2:4]) != 0x0800 || b[4] != 6 || b[5] != 4 {
		return ARPPacket{}, false
	}
	p := ARPPacket{Op: binary.BigEndian.Uint16(b[6:8])}
	if p.Op != arpRequest && p.Op != arpReply {
		return ARPPacket{}, false
	}
	copy(p.SenderMAC[:], b[8:14])
	p.SenderIP = netip.AddrFrom4([4]byte(b[14:18]))
	copy(p.TargetMAC[:], b[18:24])
	p.TargetIP = netip.AddrFrom4([4]byte(b[24:28]))
	p.GratuitousLike = p.SenderIP == p.TargetIP
	return p, true
}

// ARPRequestBytes is "who has target? tell sender" from mac. An unspecified
// sender makes it an ARP probe (RFC 5227), which every holder answers too.
func ARPRequestBytes(mac MAC, sender, target netip.Addr) []byte {
	b := make([]byte, arpLen)
	binary.BigEndian.PutUint16(b[0:2], 1)
	binary.BigEndian.PutUint16(b[2:4], 0x0800)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:8], arpRequest)
	copy(b[8:14], mac[:])
	if sender.Is4() {
		s := sender.As4()
		copy(b[14:18], s[:])
	}
	t := target.As4()
	copy(b[24:28], t[:])
	return b
}

// NeighborTable remembers which MAC last said it has which of the watched
// addresses: the sender of any ARP request or reply (IPv4), the sender of a
// Neighbor Advertisement for its target (IPv6, see NDPConn). Safe for
// concurrent use; bounded, so a link full of senders costs at most
// maxNeighbors entries, and addresses nobody asked about cost nothing.
type NeighborTable struct {
	// Expiry forgets what was not heard again for this long (10 s if 0).
	Expiry time.Duration

	mu    sync.Mutex
	watch map[netip.Addr]bool // nil: every address
	last  map[arpKey]time.Time
}

// Watch limits what is recorded to ips (the VIPs and the peers' addresses)
// and forgets the rest.
func (t *NeighborTable) Watch(ips []netip.Addr) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watch = map[netip.Addr]bool{}
	for _, ip := range ips {
		t.watch[ip.Unmap()] = true
	}
	for k := range t.last {
		if !t.watch[k.ip] {
			delete(t.last, k)
		}
	}
}

type arpKey struct {
	ip  netip.Addr
	mac MAC
}

const maxNeighbors = 4096

// Record notes that mac said it has ip at now.
func (t *NeighborTable) Record(ip netip.Addr, mac MAC, now time.Time) {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsUnspecified() {
		return // an ARP probe's sender says nothing
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watch != nil && !t.watch[ip] {
		return
	}
	if t.last == nil {
		t.last = map[arpKey]time.Time{}
	}
	k := arpKey{ip, mac}
	if _, ok := t.last[k]; !ok && len(t.last) >= maxNeighbors {
		t.expire(now)
		if len(t.last) >= maxNeighbors {
			return
		}
	}
	t.last[k] = now
}

// Addrs lists the addresses some MAC claimed after since.
func (t *NeighborTable) Addrs(since time.Time) []netip.Addr {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []netip.Addr
	for k, at := range t.last {
		if at.After(since) && !slices.Contains(out, k.ip) {
			out = append(out, k.ip)
		}
	}
	return out
}

// Since lists the MACs that said they have ip after since.
func (t *NeighborTable) Since(ip netip.Addr, since time.Time) []MAC {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []MAC
	for k, at := range t.last {
		if k.ip == ip && at.After(since) {
			out = append(out, k.mac)
		}
	}
	return out
}

func (t *NeighborTable) expire(now time.Time) {
	exp := t.Expiry
	if exp <= 0 {
		exp = 10 * time.Second
	}
	for k, at := range t.last {
		if now.Sub(at) > exp {
			delete(t.last, k)
		}
	}
}

// Len is how many (address, MAC) pairs are remembered.
func (t *NeighborTable) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.last)
}
