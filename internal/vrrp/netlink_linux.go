package vrrp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DeleteAddr removes an address from an interface with one rtnetlink
// RTM_DELADDR request (what `ip addr del` sends), without needing the ip
// binary in the container.
func DeleteAddr(iface string, p netip.Prefix) error {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return fmt.Errorf("delete %s: %w", p, err)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("delete %s: netlink: %w", p, err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("delete %s: netlink: %w", p, err)
	}

	addr := p.Addr().AsSlice()
	family := unix.AF_INET
	if p.Addr().Is6() {
		family = unix.AF_INET6
	}
	attr := func(typ uint16, data []byte) []byte {
		n := unix.SizeofRtAttr + len(data)
		b := make([]byte, (n+3)&^3)
		binary.NativeEndian.PutUint16(b[0:2], uint16(n))
		binary.NativeEndian.PutUint16(b[2:4], typ)
		copy(b[unix.SizeofRtAttr:], data)
		return b
	}
	body := make([]byte, unix.SizeofIfAddrmsg)
	body[0] = byte(family)
	body[1] = byte(p.Bits())
	binary.NativeEndian.PutUint32(body[4:8], uint32(ifi.Index))
	body = append(body, attr(unix.IFA_LOCAL, addr)...)
	body = append(body, attr(unix.IFA_ADDRESS, addr)...)

	msg := make([]byte, unix.SizeofNlMsghdr, unix.SizeofNlMsghdr+len(body))
	binary.NativeEndian.PutUint32(msg[0:4], uint32(unix.SizeofNlMsghdr+len(body)))
	binary.NativeEndian.PutUint16(msg[4:6], unix.RTM_DELADDR)
	binary.NativeEndian.PutUint16(msg[6:8], unix.NLM_F_REQUEST|unix.NLM_F_ACK)
	binary.NativeEndian.PutUint32(msg[8:12], 1)
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("delete %s: netlink send: %w", p, err)
	}
	buf := make([]byte, 4096)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return fmt.Errorf("delete %s: netlink receive: %w", p, err)
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return fmt.Errorf("delete %s: netlink: %w", p, err)
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4 {
			if errno := int32(binary.NativeEndian.Uint32(m.Data[0:4])); errno != 0 {
				return fmt.Errorf("delete %s from %s: %w", p, iface, unix.Errno(-errno))
			}
			return nil
		}
	}
	return fmt.Errorf("delete %s: no netlink acknowledgement", p)
}

// KernelNeighbors returns a Link's Neighbors: the kernel's neighbour table
// on iface (ARP and NDP entries that hold a MAC), read over netlink in the
// calling thread's network namespace. A failed read lists nothing.
func KernelNeighbors(iface string) func() map[netip.Addr][]MAC {
	return func() map[netip.Addr][]MAC {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return nil
		}
		ns, err := netlink.NeighList(ifi.Index, netlink.FAMILY_ALL)
		if err != nil {
			return nil
		}
		out := make(map[netip.Addr][]MAC, len(ns))
		for _, n := range ns {
			a, ok := netip.AddrFromSlice(n.IP)
			if !ok || len(n.HardwareAddr) != 6 || n.State&(netlink.NUD_INCOMPLETE|netlink.NUD_FAILED) != 0 {
				continue
			}
			var m MAC
			copy(m[:], n.HardwareAddr)
			a = a.Unmap()
			if !slices.Contains(out[a], m) {
				out[a] = append(out[a], m)
			}
		}
		return out
	}
}
