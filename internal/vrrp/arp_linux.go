package vrrp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// ARPConn sends ARP requests on one interface and feeds every ARP packet it
// sees there (requests, replies, gratuitous ARPs of any host) into a table.
// It needs CAP_NET_RAW; the socket belongs to the network namespace of the
// thread that opened it.
type ARPConn struct {
	Table *NeighborTable
	// Announced, when set before Run, is told of every gratuitous ARP
	// another host sends (sender and target address the same): a host
	// that says it holds the address now, where an ordinary reply may
	// come from a kernel whose processes are paused.
	Announced func(ip netip.Addr, mac MAC)
	fd        int
	ifi       *net.Interface
	mac       MAC
}

// OpenARP opens the packet socket on iface.
func OpenARP(iface string, table *NeighborTable) (*ARPConn, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("arp: %w", err)
	}
	if len(ifi.HardwareAddr) != 6 {
		return nil, fmt.Errorf("arp: %s has no Ethernet address", iface)
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_ARP)))
	if err != nil {
		return nil, fmt.Errorf("arp: packet socket: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("arp: bind to %s: %w", iface, err)
	}
	// Reads wake up this often to see whether Run was cancelled.
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("arp: %w", err)
	}
	c := &ARPConn{Table: table, fd: fd, ifi: ifi}
	copy(c.mac[:], ifi.HardwareAddr)
	return c, nil
}

// MAC is the interface's own address.
func (c *ARPConn) MAC() MAC { return c.mac }

// Ask broadcasts "who has target? tell sender".
func (c *ARPConn) Ask(sender, target netip.Addr) error {
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: c.ifi.Index, Halen: 6,
		Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	return unix.Sendto(c.fd, ARPRequestBytes(c.mac, sender, target), 0, to)
}

// Announce broadcasts a gratuitous ARP for vip ("who has vip? tell vip"
// from our MAC): every host on the link that knows vip points it at us.
func (c *ARPConn) Announce(vip netip.Addr) error { return c.Ask(vip, vip) }

// Run reads until ctx ends, then closes the socket. Malformed packets are
// dropped; our own outgoing packets are not recorded.
func (c *ARPConn) Run(ctx context.Context) error {
	defer unix.Close(c.fd)
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			if transientRead(err) {
				continue
			}
			return fmt.Errorf("arp: read: %w", err)
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		p, ok := ParseARP(buf[:n])
		if !ok || p.SenderMAC == c.mac {
			continue
		}
		c.Table.Record(p.SenderIP, p.SenderMAC, time.Now())
		if p.GratuitousLike && c.Announced != nil && !p.SenderIP.IsUnspecified() {
			c.Announced(p.SenderIP, p.SenderMAC)
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// transientRead says whether a packet socket's read error leaves the socket
// usable. ENETDOWN is the interface going down, reported once per socket:
// reads block again and resume when it comes back up. Ended on it, the
// split-brain check and the VRRP guard stayed off for good after a link
// flap (the nemesis test: a node whose link had been down never stepped
// down in a later split).
func transientRead(err error) bool {
	return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENETDOWN)
}
