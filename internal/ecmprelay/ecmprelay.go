// Package ecmprelay is the hand-over relay of BGP mode: the connections
// open through a node that leaves gracefully (SIGTERM, a drain) survive
// the withdrawal of its routes.
//
// Every node announcing a VIP gets a share of its connections from the
// ToR's ECMP hash. When one leaves, the ToR sends the packets of its
// connections to the others, which have no socket for them and reset them:
// 0 of 52-59 requests on such connections answered in the fault drill,
// where VRRP mode relays them back to the node that resigned the VIP.
//
// Here the leaving node tells the other nodes of its groups first (a UDP
// message to each, answered, before the withdrawal): for the time it still
// holds the VIPs on lo, they send it every TCP packet for those VIPs that
// is not a SYN and that no connection of theirs expects (the socket lookup
// finds only a wildcard listener), unchanged, and drop it. The nodes are
// in different subnets (racks) in a routed fabric, so the packet cannot go
// to the leaving node's MAC as in VRRP mode: it travels in VXLAN between
// the nodes' own addresses (a device of ours, unicast to each peer, no
// flooding, no learning). The leaving node gives a relayed packet to its
// connection, or resets it as any node would.
//
// What it cannot do: the connections of the nodes that stay, which the
// ToR's hash-threshold ECMP moves between them when a next hop leaves
// (17-24 % of them in the drill), are not known to the leaving node; only
// resilient next-hop hashing on the ToR keeps them where they are.
package ecmprelay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"slices"
	"time"
)

// The relay's names and numbers on a node. The ports are UDP between the
// nodes' own addresses: DataPort carries the relayed packets (VXLAN),
// ControlPort the leaving messages and their answers.
const (
	Device      = "infradns-relay"
	Table       = "infradns_ecmp_relay"
	LeavingMap  = "leaving"
	DataPort    = 4799
	ControlPort = 4798
	VNI         = 9191
	// MaxPeers bounds the peers of one node (the keys are a /24).
	MaxPeers = 254
	// MaxLeave bounds how long a leaving message makes a node relay.
	MaxLeave = 10 * time.Second
)

// The keys: each peer is a neighbour of the device at an address of its
// own in these link-local ranges, with the peer's device MAC, so that
// nft's dup finds the peer from the address in the leaving map.
var (
	keyNet4 = netip.MustParsePrefix("169.254.91.0/24")
	keyNet6 = netip.MustParsePrefix("fe80:91::/64")
	// OwnKey4 is the device's own IPv4 address: without one, the kernel's
	// reverse-path filter drops every packet arriving on it.
	OwnKey4 = netip.MustParseAddr("169.254.91.0")
)

// KeyNets are the key ranges, routed to the device.
func KeyNets() []netip.Prefix { return []netip.Prefix{keyNet4, keyNet6} }

// Peer is another node of this node's VIP groups.
type Peer struct {
	// Addr is its own address (the VXLAN endpoint).
	Addr netip.Addr
	MAC  net.HardwareAddr
	// Key4 and Key6 are its neighbour addresses on this node's device.
	Key4, Key6 netip.Addr
}

// Plan is the relay of one node.
type Plan struct {
	// Local is this node's address of the family the peers are reached
	// in; invalid when there is no peer to relay to.
	Local netip.Addr
	MAC   net.HardwareAddr
	Peers []Peer
}

// Empty says whether there is nobody to relay to.
func (p Plan) Empty() bool { return !p.Local.IsValid() || len(p.Peers) == 0 }

// Equal says whether two plans make the same device.
func (p Plan) Equal(o Plan) bool {
	return p.Local == o.Local && slices.EqualFunc(p.Peers, o.Peers, func(a, b Peer) bool {
		return a.Addr == b.Addr && a.Key4 == b.Key4 && a.Key6 == b.Key6
	})
}

// Peer returns the peer whose address is a.
func (p Plan) Peer(a netip.Addr) (Peer, bool) {
	a = a.Unmap()
	for _, pe := range p.Peers {
		if pe.Addr == a {
			return pe, true
		}
	}
	return Peer{}, false
}

// NewPlan is the relay between this node (its addresses self) and the
// other nodes of its groups (their addresses peers, any family). The nodes
// talk IPv4 when this node and a peer have it, IPv6 otherwise. Beyond
// MaxPeers, the first MaxPeers in address order are kept, and the error
// says so (the plan is still usable).
func NewPlan(self, peers []netip.Addr) (Plan, error) {
	var local netip.Addr
	for _, is4 := range []bool{true, false} {
		var mine netip.Addr
		for _, a := range self {
			if a = a.Unmap(); a.Is4() == is4 && a.IsGlobalUnicast() {
				mine = a
				break
			}
		}
		if !mine.IsValid() {
			continue
		}
		if slices.ContainsFunc(peers, func(p netip.Addr) bool {
			p = p.Unmap()
			return p.Is4() == is4 && p.IsGlobalUnicast() && !slices.Contains(self, p)
		}) {
			local = mine
			break
		}
	}
	if !local.IsValid() {
		return Plan{}, nil
	}
	var addrs []netip.Addr
	for _, p := range peers {
		p = p.Unmap()
		if p.Is4() == local.Is4() && p.IsGlobalUnicast() && !slices.Contains(self, p) && !slices.Contains(addrs, p) {
			addrs = append(addrs, p)
		}
	}
	slices.SortFunc(addrs, func(a, b netip.Addr) int { return a.Compare(b) })
	var err error
	if len(addrs) > MaxPeers {
		err = fmt.Errorf("ecmp relay: %d peers, relaying to the first %d only", len(addrs), MaxPeers)
		addrs = addrs[:MaxPeers]
	}
	p := Plan{Local: local, MAC: MACFor(local)}
	for i, a := range addrs {
		p.Peers = append(p.Peers, Peer{Addr: a, MAC: MACFor(a), Key4: keyAt(keyNet4, i+1), Key6: keyAt(keyNet6, i+1)})
	}
	return p, err
}

func keyAt(n netip.Prefix, i int) netip.Addr {
	b := n.Addr().AsSlice()
	b[len(b)-1] = byte(i)
	a, _ := netip.AddrFromSlice(b)
	return a
}

// MACFor is the device MAC of the node whose address is a: every node
// computes its peers' from their addresses. Locally administered, unicast;
// an IPv4 address is in it whole, an IPv6 one hashed. Each node's must
// differ from its peers': VXLAN drops a frame that bears its own device's
// MAC as source.
func MACFor(a netip.Addr) net.HardwareAddr {
	a = a.Unmap()
	var tail []byte
	if a.Is4() {
		b := a.As4()
		tail = b[:]
	} else {
		h := fnv.New32a()
		b := a.As16()
		h.Write(b[:])
		tail = h.Sum(nil)
	}
	return append(net.HardwareAddr{0x02, 0x49}, tail...)
}

// Key is the address a node relays vip's packets to for peer p: the key
// of vip's family.
func (p Peer) Key(vip netip.Addr) netip.Addr {
	if vip.Unmap().Is4() {
		return p.Key4
	}
	return p.Key6
}

// SetupScript is the nft script that (re)creates the relay's tables: in
// each family, the leaving map (a VIP to the key of the node that left it;
// each entry lasts what its message said) and the rules. A packet for a
// VIP in the map that is not a SYN and that only a wildcard listener would
// take is sent to the leaving node through the device and dropped here.
// There it goes to its connection; one that has none gets the reset this
// node would have sent (a connection of a node that stays, which the ToR
// moved: dropped, it would hang until the entry ends), and one for a VIP
// the node no longer holds is dropped rather than routed back.
func SetupScript() string {
	s := TeardownScript()
	for _, f := range []struct{ family, addr string }{{"ip", "ipv4_addr"}, {"ip6", "ipv6_addr"}} {
		s += fmt.Sprintf(`table %[1]s %[2]s {
	map %[3]s {
		type %[4]s : %[4]s
		flags timeout
	}
	chain prerouting {
		type filter hook prerouting priority raw; policy accept;
		iifname "%[5]s" fib daddr type != local counter drop
		iifname != "%[5]s" %[1]s daddr @%[3]s tcp flags & syn == 0 socket wildcard 1 counter dup to %[1]s daddr map @%[3]s device "%[5]s" drop
	}
}
`, f.family, Table, LeavingMap, f.addr, Device)
	}
	return s
}

// TeardownScript removes the relay's tables (harmless without them).
func TeardownScript() string {
	var s string
	for _, family := range []string{"ip", "ip6"} {
		s += fmt.Sprintf("table %[1]s %[2]s {}\ndelete table %[1]s %[2]s\n", family, Table)
	}
	return s
}

// Message is a leaving message, or its answer (Ack). ID pairs an answer
// with its message.
type Message struct {
	Ack  bool
	ID   uint32
	For  time.Duration
	VIPs []netip.Addr
}

const (
	magic      = "IDNSRLY"
	version    = 1
	headerLen  = len(magic) + 1 + 1 + 4 + 4 + 2
	maxMsgVIPs = 256
)

// ErrMessage is wrapped by every error about a malformed message.
var ErrMessage = errors.New("not a relay message")

// Marshal encodes m: the magic, a version, a flags byte (1: an answer), the
// ID, the duration in milliseconds, the number of VIPs and each VIP as 16
// bytes (an IPv4 one mapped).
func (m Message) Marshal() []byte {
	b := make([]byte, 0, headerLen+16*len(m.VIPs))
	b = append(b, magic...)
	b = append(b, version)
	var flags byte
	if m.Ack {
		flags = 1
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, m.ID)
	b = binary.BigEndian.AppendUint32(b, uint32(min(max(m.For, 0), MaxLeave).Milliseconds()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.VIPs)))
	for _, v := range m.VIPs {
		a := v.As16()
		b = append(b, a[:]...)
	}
	return b
}

// ParseMessage decodes what Marshal encodes, and refuses anything else.
func ParseMessage(b []byte) (Message, error) {
	if len(b) < headerLen || string(b[:len(magic)]) != magic {
		return Message{}, fmt.Errorf("%w: no header", ErrMessage)
	}
	b = b[len(magic):]
	if b[0] != version {
		return Message{}, fmt.Errorf("%w: version %d", ErrMessage, b[0])
	}
	if b[1]&^1 != 0 {
		return Message{}, fmt.Errorf("%w: flags %#x", ErrMessage, b[1])
	}
	m := Message{Ack: b[1] == 1, ID: binary.BigEndian.Uint32(b[2:]),
		For: time.Duration(binary.BigEndian.Uint32(b[6:])) * time.Millisecond}
	n := int(binary.BigEndian.Uint16(b[10:]))
	b = b[12:]
	if n > maxMsgVIPs || len(b) != 16*n {
		return Message{}, fmt.Errorf("%w: %d VIPs in %d bytes", ErrMessage, n, len(b))
	}
	for i := range n {
		m.VIPs = append(m.VIPs, netip.AddrFrom16([16]byte(b[16*i:16*i+16])).Unmap())
	}
	return m, nil
}

// Entry is one element of the leaving map: relay VIP's packets to Key for
// For.
type Entry struct {
	VIP, Key netip.Addr
	For      time.Duration
}

// Accept is what a leaving message m from the address from makes this
// node relay: the VIPs of m that are also ours (vips), to from's key, for
// m's time capped at MaxLeave. A sender that is no peer gets nothing.
func Accept(p Plan, vips []netip.Addr, from netip.Addr, m Message) ([]Entry, error) {
	if m.Ack {
		return nil, fmt.Errorf("an answer, not a leaving message")
	}
	peer, ok := p.Peer(from)
	if !ok {
		return nil, fmt.Errorf("leaving message from %s, which is no peer", from.Unmap())
	}
	d := min(m.For, MaxLeave)
	if d <= 0 {
		return nil, nil
	}
	var out []Entry
	for _, v := range m.VIPs {
		v = v.Unmap()
		if !slices.Contains(vips, v) || slices.ContainsFunc(out, func(e Entry) bool { return e.VIP == v }) {
			continue
		}
		out = append(out, Entry{VIP: v, Key: peer.Key(v), For: d})
	}
	return out, nil
}
