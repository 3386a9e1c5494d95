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
//
// An IPv6 VIP is also kept on lo while it is on standby (SetStandby: the
// node could take it over), held or not. Linux makes an IPv6 address
// usable (its local route) only when addrconf's work runs, after the
// netlink request that added it has returned, even with nodad; keepalived
// sends its unsolicited Neighbor Advertisement at once, so a client could
// switch to the new holder before it accepts the VIP. In the lab, with one
// core kept busy, the client's SYN was dropped there (Ip6InAddrErrors) in
// about one graceful hand-over in eight, a 1-s retry. A copy made long
// before is usable; IPv4 addresses are usable when the request returns.
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
	// Arrived, when set, is told about each VIP an address event adds to
	// Interface (a takeover), before Changed: a starved keepalived that
	// times out and hears the holder's queued advert at once holds the VIP
	// for well under a millisecond, gone before any later look.
	Arrived func(netip.Prefix)

	mu sync.Mutex
	// While Run runs: lo, and a netlink handle of Run's namespace (the
	// timers and SetStandby run on other threads).
	lo      netlink.Link
	nl      *netlink.Handle
	standby map[netip.Addr]bool
	copies  map[netip.Prefix]*loCopy
}

// loCopy is what keeps one VIP on lo: held on the interface, draining
// (its timer), on standby (IPv6). The copy is there while any of them is.
type loCopy struct {
	held  bool
	drain *time.Timer
	onLo  bool
}

// SetStandby puts the IPv6 VIPs among vips on standby (on: kept on lo while
// not held) or takes them off it. The node's health for their groups
// decides: a node that cannot serve must not take their packets (its own
// connections to them included). It may be called before Run, whose copies
// follow.
func (d *Drainer) SetStandby(vips []netip.Addr, on bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.standby == nil {
		d.standby = map[netip.Addr]bool{}
	}
	for _, v := range vips {
		v = v.Unmap()
		if !v.Is6() || !contains(d.VIPs, v) {
			continue
		}
		d.standby[v] = on
		d.sync(netip.PrefixFrom(v, v.BitLen()), false)
	}
}

// sync makes lo agree with what p's copy is for (mu held, Run running);
// refresh writes a wanted copy even when it is there (see released).
func (d *Drainer) sync(p netip.Prefix, refresh bool) {
	if d.lo == nil {
		return
	}
	c := d.entry(p)
	want := c.held || c.drain != nil || (p.IsSingleIP() && d.standby[p.Addr()])
	switch {
	case want && (!c.onLo || refresh):
		if err := d.nl.AddrReplace(d.lo, d.addr(p)); err != nil {
			if d.Failed != nil {
				d.Failed(p, err)
			}
			return
		}
		c.onLo = true
	case !want && c.onLo:
		d.remove(p)
		c.onLo = false
	}
	if !want {
		delete(d.copies, p)
	}
}

// Holding says whether, while Run runs, a VIP is held on the interface
// (held) or a released one is still kept on lo for its drain (draining).
func (d *Drainer) Holding() (held, draining bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.copies {
		held = held || c.held
		draining = draining || c.drain != nil
	}
	return held, draining
}

// entry is p's copy state, made when there is none (mu held).
func (d *Drainer) entry(p netip.Prefix) *loCopy {
	c := d.copies[p]
	if c == nil {
		c = &loCopy{}
		d.copies[p] = c
	}
	return c
}

// Run watches until ctx ends, then removes the copies it still holds.
func (d *Drainer) Run(ctx context.Context) error {
	ifi, err := net.InterfaceByName(d.Interface)
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	nl, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	defer nl.Close()
	lo, err := nl.LinkByName("lo")
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
	defer func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for p, c := range d.copies {
			if c.drain != nil {
				c.drain.Stop()
			}
			if c.onLo {
				d.remove(p)
			}
		}
		d.lo, d.nl, d.copies = nil, nil, nil
	}()
	eligible := func(p netip.Prefix) bool { return DrainCopy(p, d.VIPs, arpIgnore(d.Interface)) }
	held := func(p netip.Prefix) {
		if !eligible(p) {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		c := d.entry(p)
		if c.drain != nil {
			c.drain.Stop()
			c.drain = nil
		}
		c.held = true
		d.sync(p, false)
	}
	released := func(p netip.Prefix) {
		if !eligible(p) {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		c := d.entry(p)
		if c.drain != nil {
			c.drain.Stop()
		}
		c.held = false
		// Normally there already; made now when the VIP came before us.
		var t *time.Timer
		t = time.AfterFunc(drain, func() {
			d.mu.Lock()
			defer d.mu.Unlock()
			if c := d.copies[p]; c != nil && c.drain == t {
				c.drain = nil
				d.sync(p, false)
			}
		})
		c.drain = t
		// Written again, as before the standby copies: the lab's hand-overs
		// lose nothing with it, and a replace costs one netlink round trip.
		d.sync(p, true)
		if c.onLo && d.Kept != nil {
			d.Kept(p)
		}
	}
	// Copies a killed predecessor left behind are stale now; the VIPs held
	// at this moment get theirs again, and those on standby theirs (subscribed
	// first: nothing is missed).
	d.mu.Lock()
	d.lo, d.nl, d.copies = lo, nl, map[netip.Prefix]*loCopy{}
	d.cleanup()
	for v, on := range d.standby {
		if on {
			d.sync(netip.PrefixFrom(v, v.BitLen()), false)
		}
	}
	d.mu.Unlock()
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
				// Told first: its relay races the holder's gratuitous ARP.
				if d.Arrived != nil && eligible(p) {
					d.Arrived(p)
				}
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

func (d *Drainer) remove(p netip.Prefix) {
	if err := d.nl.AddrDel(d.lo, d.addr(p)); err != nil && d.Failed != nil {
		d.Failed(p, err)
	}
}

// cleanup removes host copies of our VIPs from lo (mu held).
func (d *Drainer) cleanup() {
	as, err := d.nl.AddrList(d.lo, netlink.FAMILY_ALL)
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
			_ = d.nl.AddrDel(d.lo, &a)
		}
	}
}
