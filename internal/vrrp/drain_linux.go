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

// Drainer keeps a copy on lo of each VIP keepalived holds on the VRRP
// interface, and keeps it for Drain after keepalived takes the VIP off, so
// the connections clients start in the moment before the next holder's
// gratuitous ARP reaches them still land here and are served (haproxy and
// the routers listen on every address), and the connections open at the
// hand-over are finished here (the new holder relays their packets back,
// see Relay). The copy is made when the VIP arrives, not when it leaves:
// made after the removal, it left a window in which a SYN found no address
// (dropped, retried after 1 s). Needs CAP_NET_ADMIN.
type Drainer struct {
	Interface string
	VIPs      []netip.Addr
	Drain     time.Duration // 0: DefaultDrain
	// Kept, when set, is told about each copy made (a log line).
	Kept func(netip.Prefix)
	// Failed, when set, is told about each copy that could not be made or
	// removed.
	Failed func(netip.Prefix, error)
	// Changed, when set, is told after each address event on Interface
	// (the holder boost looks at once).
	Changed func()
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
	ch := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	if err := netlink.AddrSubscribeWithOptions(ch, done, netlink.AddrSubscribeOptions{ReceiveBufferSize: 1 << 20}); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	var mu sync.Mutex
	// copies: each copy on lo; a timer while it drains, nil while the VIP
	// is held. A copy whose timer fires after the VIP came back is kept:
	// the timer's entry was replaced.
	copies := map[netip.Prefix]*time.Timer{}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for p, t := range copies {
			if t != nil {
				t.Stop()
			}
			d.remove(lo, p)
		}
	}()
	eligible := func(p netip.Prefix) bool { return DrainCopy(p, d.VIPs, arpIgnore(d.Interface)) }
	// makeCopy puts p on lo (mu held); a failure is reported and forgets p.
	makeCopy := func(p netip.Prefix) bool {
		if err := netlink.AddrReplace(lo, d.addr(p)); err != nil {
			if d.Failed != nil {
				d.Failed(p, err)
			}
			delete(copies, p)
			return false
		}
		return true
	}
	held := func(p netip.Prefix) {
		if !eligible(p) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if t, ok := copies[p]; ok && t == nil {
			return
		} else if t != nil {
			t.Stop()
		}
		if makeCopy(p) {
			copies[p] = nil
		}
	}
	released := func(p netip.Prefix) {
		if !eligible(p) {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if t := copies[p]; t != nil {
			t.Stop()
		}
		// Normally there already; made now when the VIP came before us.
		if !makeCopy(p) {
			return
		}
		if d.Kept != nil {
			d.Kept(p)
		}
		var t *time.Timer
		t = time.AfterFunc(drain, func() {
			mu.Lock()
			defer mu.Unlock()
			if copies[p] != t {
				return // held again, or drained again since
			}
			delete(copies, p)
			d.remove(lo, p)
		})
		copies[p] = t
	}
	// Copies a killed predecessor left behind are stale now; the VIPs held
	// at this moment get theirs again (subscribed first: nothing is missed).
	d.cleanup(lo)
	if ps, err := InterfacePrefixes(d.Interface); err == nil {
		for _, p := range ps {
			held(p)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-ch:
			if !ok {
				return fmt.Errorf("drain: address events stopped")
			}
			if u.LinkIndex != ifi.Index {
				continue
			}
			ip, ok := netip.AddrFromSlice(u.LinkAddress.IP)
			if !ok {
				continue
			}
			ones, _ := u.LinkAddress.Mask.Size()
			p := netip.PrefixFrom(ip.Unmap(), ones)
			if u.NewAddr {
				held(p)
			} else {
				released(p)
			}
			if d.Changed != nil {
				d.Changed()
			}
		}
	}
}

// arpIgnore is the interface's effective arp_ignore: the larger of "all"
// and its own.
func arpIgnore(iface string) int {
	return max(ParseSysctlInt(os.ReadFile("/proc/sys/net/ipv4/conf/all/arp_ignore")),
		ParseSysctlInt(os.ReadFile("/proc/sys/net/ipv4/conf/"+iface+"/arp_ignore")))
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
