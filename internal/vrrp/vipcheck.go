package vrrp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// VIPChecker removes the VIPs a dead keepalived left on the interface. After
// kill -9 (or an OOM kill of its container) keepalived cannot remove its
// addresses, and the lab showed the VIP on two nodes at once: the dead holder
// still answers ARP for it. While the keepalived process is alive the
// checker does nothing: keepalived owns its addresses.
type VIPChecker struct {
	Interface string
	VIPs      []netip.Addr
	// Alive reports whether keepalived runs (see PidAlive).
	Alive func() bool
	// Interval between checks; a VIP is removed after Confirm checks in a
	// row found keepalived dead, so a restart in progress is left alone.
	Interval time.Duration
	Confirm  int
	// Removed, when set, is told about each removal (a log line, a metric).
	Removed func(netip.Prefix, error)
}

// Run checks until ctx is cancelled.
func (v *VIPChecker) Run(ctx context.Context) error {
	interval := v.Interval
	if interval <= 0 {
		interval = time.Second
	}
	confirm := max(v.Confirm, 1)
	t := time.NewTicker(interval)
	defer t.Stop()
	dead := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if v.Alive() {
			dead = 0
			continue
		}
		if dead++; dead < confirm {
			continue
		}
		present, err := InterfacePrefixes(v.Interface)
		if err != nil {
			continue // the interface may be gone; nothing to clean
		}
		for _, p := range Stale(present, v.VIPs) {
			err := DeleteAddr(v.Interface, p)
			if v.Removed != nil {
				v.Removed(p, err)
			}
		}
	}
}

// Stale are the addresses on the interface that are VIPs as keepalived adds
// them: host prefixes (/32, /128). A VIP inside a node's own subnet prefix
// (a misconfiguration, or the node's real address) is never touched.
func Stale(present []netip.Prefix, vips []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range present {
		if p.IsSingleIP() && contains(vips, p.Addr()) {
			out = append(out, p)
		}
	}
	return out
}

func contains(as []netip.Addr, a netip.Addr) bool {
	for _, x := range as {
		if x.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// InterfacePrefixes lists the addresses of an interface with their prefix
// lengths.
func InterfacePrefixes(iface string) ([]netip.Prefix, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	return Prefixes(as), nil
}

// Prefixes converts what net.Interface.Addrs returns.
func Prefixes(as []net.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ones, _ := n.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out
}

// PidAlive returns an Alive func: true while the process named in pidfile
// exists and is called comm (a reused pid of another program is not alive).
func PidAlive(pidfile, comm string) func() bool {
	return func() bool {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			return false
		}
		if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
			return false
		}
		name, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil {
			// Another pid namespace hides /proc: trust the signal check.
			return true
		}
		return strings.TrimSpace(string(name)) == comm
	}
}

// Held returns which of vips are on the interface now (with any prefix).
func Held(iface string, vips []netip.Addr) ([]netip.Addr, error) {
	present, err := InterfacePrefixes(iface)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, v := range vips {
		for _, p := range present {
			if p.Addr() == v.Unmap() {
				out = append(out, v.Unmap())
				break
			}
		}
	}
	return out, nil
}
