package vrrp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Reader reads the VRRP adverts that reach one interface, multicast and
// unicast, IPv4 and IPv6, with the link-layer source of each: one packet
// socket per family, a kernel filter that passes only VRRP, and one read
// loop for both. It needs CAP_NET_RAW; the sockets belong to the network
// namespace of the thread that runs it.
type Reader struct {
	// Interface is the link to listen on.
	Interface string
	// Handle receives each valid advert, from the one read loop. Its
	// Advert.Addresses is reused for the next advert: copy what is kept.
	Handle func(Observation)
	// Invalid, when set, receives what failed to parse or came from off the
	// link (TTL or hop limit below 255): a counter's hook.
	Invalid func(error)
}

// vrrpFilter passes what carries VRRP right after the IP header (offsets
// count from it: SOCK_DGRAM): IPv4 protocol 112 or IPv6 next header 112.
// The socket's protocol (ETH_P_IP or ETH_P_IPV6) says which byte to read.
func vrrpFilter(v6 bool) []bpf.Instruction {
	off := uint32(9)
	if v6 {
		off = 6
	}
	return []bpf.Instruction{
		bpf.LoadAbsolute{Off: off, Size: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: Protocol, SkipFalse: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	}
}

// groupMAC is the Ethernet multicast address of a family's VRRP group
// (224.0.0.18, ff02::12): joined on the packet socket, so the adverts reach
// it before keepalived has joined the group itself.
func groupMAC(v6 bool) [8]byte {
	if v6 {
		return [8]byte{0x33, 0x33, 0, 0, 0, 0x12}
	}
	return [8]byte{0x01, 0x00, 0x5e, 0, 0, 0x12}
}

// Run listens until ctx is cancelled. It returns an error when a socket
// cannot be opened or the interface is unknown, and nil after cancellation.
func (r *Reader) Run(ctx context.Context) error {
	ifi, err := net.InterfaceByName(r.Interface)
	if err != nil {
		return fmt.Errorf("vrrp reader: %w", err)
	}
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, v6 := range []bool{false, true} {
		fd, err := openVRRPSocket(ifi, v6)
		if err != nil {
			return fmt.Errorf("vrrp reader: %w", err)
		}
		fds = append(fds, fd)
	}
	pfds := make([]unix.PollFd, len(fds))
	buf := make([]byte, 1500)
	addrs := make([]netip.Addr, 0, 255)
	for ctx.Err() == nil {
		for i, fd := range fds {
			pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		}
		// Wakes up this often to see whether Run was cancelled.
		if _, err := unix.Poll(pfds, 200); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("vrrp reader: poll: %w", err)
		}
		for i, p := range pfds {
			// POLLERR alone is the socket's pending error (ENETDOWN after a
			// link flap): read it, or poll reports it forever.
			if p.Revents&(unix.POLLIN|unix.POLLERR) == 0 {
				continue
			}
			// What is queued now, then back to poll: one family cannot starve
			// the other.
			for range 64 {
				n, from, err := unix.Recvfrom(fds[i], buf, unix.MSG_DONTWAIT)
				if err != nil {
					if transientRead(err) {
						break
					}
					return fmt.Errorf("vrrp reader: read: %w", err)
				}
				ll, ok := from.(*unix.SockaddrLinklayer)
				if !ok || ll.Pkttype == unix.PACKET_OUTGOING {
					continue
				}
				var mac MAC
				if ll.Halen == 6 {
					copy(mac[:], ll.Addr[:6])
				}
				r.deliver(buf[:n], mac, addrs)
			}
		}
	}
	return nil
}

func openVRRPSocket(ifi *net.Interface, v6 bool) (int, error) {
	proto, family := uint16(unix.ETH_P_IP), "ipv4"
	if v6 {
		proto, family = unix.ETH_P_IPV6, "ipv6"
	}
	raw, err := bpf.Assemble(vrrpFilter(v6))
	if err != nil {
		return -1, fmt.Errorf("%s filter: %w", family, err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(proto)))
	if err != nil {
		return -1, fmt.Errorf("%s packet socket: %w", family, err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s %s on %s: %w", family, what, ifi.Name, err)
	}
	// The filter goes on before the bind: nothing unfiltered is queued.
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}); err != nil {
		return fail("filter", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(proto), Ifindex: ifi.Index}); err != nil {
		return fail("bind", err)
	}
	if len(ifi.HardwareAddr) == 6 {
		mr := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6, Address: groupMAC(v6)}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
			return fail("join the vrrp group", err)
		}
	}
	return fd, nil
}

func (r *Reader) deliver(b []byte, mac MAC, addrs []netip.Addr) {
	src, _, a, err := parsePacket(b, addrs)
	if err != nil {
		if r.Invalid != nil {
			r.Invalid(fmt.Errorf("from %s (%s): %w", src, mac, err))
		}
		return
	}
	if r.Handle != nil {
		r.Handle(Observation{Source: src, MAC: mac, Advert: a})
	}
}
