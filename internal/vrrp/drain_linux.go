package vrrp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
)

// Drainer keeps each VIP that keepalived takes off the VRRP interface on lo
// for Drain, so the connections clients start in the moment before the
// next holder's gratuitous ARP reaches them still land here and are served
// (haproxy and the routers listen on every address), instead of being
// dropped by a node that no longer has the address. It reacts to the
// kernel's address events, within microseconds of the removal. Needs
// CAP_NET_ADMIN.
type Drainer struct {
	Interface string
	VIPs      []netip.Addr
	Drain     time.Duration // 0: DefaultDrain
	// Kept, when set, is told about each copy made (a log line).
	Kept func(netip.Prefix)
	// Failed, when set, is told about each copy that could not be made or
	// removed.
	Failed func(netip.Prefix, error)
}

// Run watches until ctx ends, then removes the copies it still holds.
func (d *Drainer) Run(ctx context.Context) error {
	ifi, err := net.InterfaceByName(d.Interface)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	drain := d.Drain
	if drain <= 0 {
		drain = DefaultDrain
	}
	// Copies a killed predecessor left behind are stale now.
	d.cleanup(lo)
	ch := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{ReceiveBufferSize: 1 << 20}); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	var mu sync.Mutex
	timers := map[netip.Prefix]*time.Timer{}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for p, t := range timers {
			t.Stop()
			d.remove(lo, p)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-ch:
			if !ok {
				return fmt.Errorf("drain: address events stopped")
			}
			if u.NewAddr || u.LinkIndex != ifi.Index {
				continue
			}
			ip, ok := netip.AddrFromSlice(u.LinkAddress.IP)
			if !ok {
				continue
			}
			ones, _ := u.LinkAddress.Mask.Size()
			p := netip.PrefixFrom(ip.Unmap(), ones)
			arpIgnore := max(ParseSysctlInt(os.ReadFile("/proc/sys/net/ipv4/conf/all/arp_ignore")),
				ParseSysctlInt(os.ReadFile("/proc/sys/net/ipv4/conf/"+d.Interface+"/arp_ignore")))
			if !DrainCopy(p, d.VIPs, arpIgnore) {
				continue
			}
			if err := netlink.AddrReplace(lo, d.addr(p)); err != nil {
				if d.Failed != nil {
					d.Failed(p, err)
				}
				continue
			}
			if d.Kept != nil {
				d.Kept(p)
			}
			mu.Lock()
			if t := timers[p]; t != nil {
				t.Stop()
			}
			timers[p] = time.AfterFunc(drain, func() {
				mu.Lock()
				defer mu.Unlock()
				delete(timers, p)
				d.remove(lo, p)
			})
			mu.Unlock()
		}
	}
}

func (d *Drainer) addr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
	if p.Addr().Is6() {
		a.Flags = 0x02 // IFA_F_NODAD: nothing to detect on lo
	}
	return a
}

func (d *Drainer) remove(lo netlink.Link, p netip.Prefix) {
	if err := netlink.AddrDel(lo, d.addr(p)); err != nil && d.Failed != nil {
		d.Failed(p, err)
	}
}

// cleanup removes host copies of our VIPs from lo.
func (d *Drainer) cleanup(lo netlink.Link) {
	as, err := netlink.AddrList(lo, netlink.FAMILY_ALL)
	if err != nil {
		return
	}
	for _, a := range as {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		ones, _ := a.Mask.Size()
		p := netip.PrefixFrom(ip.Unmap(), ones)
		if p.IsSingleIP() && contains(d.VIPs, p.Addr()) {
			_ = netlink.AddrDel(lo, &a)
		}
	}
}
