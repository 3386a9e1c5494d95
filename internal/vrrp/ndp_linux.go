package vrrp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// NDPConn is ARPConn for IPv6: it sends Neighbor Solicitations and
// unsolicited Neighbor Advertisements on one interface, and records into
// a table who advertised which address (Neighbor Advertisements), by the
// frame's link-layer source. A packet socket with a kernel filter sees only
// those, so a busy link costs nothing. It needs CAP_NET_RAW.
type NDPConn struct {
	Table *NeighborTable
	// Announced, when set before Run, is told of every unsolicited
	// Neighbor Advertisement another host sends (see ARPConn.Announced).
	Announced func(ip netip.Addr, mac MAC)
	fd        int
	send      *ipv6.PacketConn
	ifi       *net.Interface
	mac       MAC
}

// ndpFilter passes Neighbor Advertisements (ICMPv6 type 136 right after
// the fixed header: ND packets carry no extension headers). Offsets count
// from the IPv6 header (SOCK_DGRAM).
var ndpFilter = []bpf.Instruction{
	bpf.LoadAbsolute{Off: 6, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: 58, SkipFalse: 3},
	bpf.LoadAbsolute{Off: ipv6HdrLen, Size: 1},
	bpf.JumpIf{Cond: bpf.JumpEqual, Val: icmp6NA, SkipFalse: 1},
	bpf.RetConstant{Val: 0xffff},
	bpf.RetConstant{Val: 0},
}

// OpenNDP opens the sockets on iface.
func OpenNDP(iface string, table *NeighborTable) (*NDPConn, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("ndp: %w", err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("ndp: %s has no Ethernet address", iface)
	}
	raw, err := bpf.Assemble(ndpFilter)
	if err != nil {
		return nil, fmt.Errorf("ndp: filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IPV6)))
	if err != nil {
		return nil, fmt.Errorf("ndp: packet socket: %w", err)
	}
	fail := func(err error) (*NDPConn, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("ndp: %w", err)
	}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		return fail(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IPV6), Ifindex: ifi.Index}); err != nil {
		return fail(err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fail(err)
	}
	c, err := net.ListenPacket("ip6:ipv6-icmp", "::")
	if err != nil {
		return fail(err)
	}
	send := ipv6.NewPacketConn(c)
	// Send only: nothing is ever read from it.
	var block ipv6.ICMPFilter
	block.SetAll(true)
	for _, err := range []error{send.SetICMPFilter(&block), send.SetMulticastHopLimit(255), send.SetHopLimit(255),
		send.SetMulticastInterface(ifi), send.SetMulticastLoopback(false)} {
		if err != nil {
			c.Close()
			return fail(err)
		}
	}
	n := &NDPConn{Table: table, fd: fd, send: send, ifi: ifi}
	copy(n.mac[:], ifi.HardwareAddr)
	return n, nil
}

// MAC is the interface's own address.
func (n *NDPConn) MAC() MAC { return n.mac }

// Ask multicasts a Neighbor Solicitation for target to its solicited-node
// group; whoever has it answers.
func (n *NDPConn) Ask(target netip.Addr) error {
	return n.write(NeighborSolicitation(target, n.mac), SolicitedNode(target))
}

// Announce multicasts an unsolicited Neighbor Advertisement (override) for
// vip to all nodes.
func (n *NDPConn) Announce(vip netip.Addr) error {
	return n.write(UnsolicitedAdvertisement(vip, n.mac), netip.MustParseAddr("ff02::1"))
}

func (n *NDPConn) write(msg []byte, to netip.Addr) error {
	// Hop limit and interface are the socket's (OpenNDP). The zone is the
	// index: a name would be looked up in the calling thread's namespace.
	_, err := n.send.WriteTo(msg, nil, &net.IPAddr{IP: to.AsSlice(), Zone: strconv.Itoa(n.ifi.Index)})
	return err
}

// Run reads until ctx ends, then closes the sockets.
func (n *NDPConn) Run(ctx context.Context) error {
	defer unix.Close(n.fd)
	defer n.send.Close()
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		k, from, err := unix.Recvfrom(n.fd, buf, 0)
		if err != nil {
			if transientRead(err) {
				continue
			}
			return fmt.Errorf("ndp: read: %w", err)
		}
		ll, ok := from.(*unix.SockaddrLinklayer)
		if !ok || ll.Pkttype == unix.PACKET_OUTGOING || ll.Halen != 6 {
			continue
		}
		var mac MAC
		copy(mac[:], ll.Addr[:6])
		p, ok := ParseIPv6(buf[:k])
		if !ok || mac == n.mac {
			continue
		}
		n.Table.Record(p.Target, mac, time.Now())
		if !p.Solicited && n.Announced != nil {
			n.Announced(p.Target, mac)
		}
	}
	return nil
}
