package vrrp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Listener reads the VRRP adverts that reach one interface, multicast and
// unicast, for both address families. It needs CAP_NET_RAW.
type Listener struct {
	// Interface is the link to listen on.
	Interface string
	// V4 and V6 select the families; both false means both.
	V4, V6 bool
	// Handle receives each valid advert. It is called from the listener's
	// goroutines (one per family), so it must be safe for concurrent use.
	Handle func(Observation)
	// Invalid, when set, receives what failed to parse: a counter's hook.
	Invalid func(error)
}

// Run listens until ctx is cancelled. It returns an error when a socket cannot
// be opened or the interface is unknown, and nil after cancellation.
func (l *Listener) Run(ctx context.Context) error {
	ifi, err := net.InterfaceByName(l.Interface)
	if err != nil {
		return fmt.Errorf("vrrp listener: %w", err)
	}
	v4, v6 := l.V4, l.V6
	if !v4 && !v6 {
		v4, v6 = true, true
	}
	var closers []func() error
	var loops []func() error
	closeAll := func() {
		for _, c := range closers {
			_ = c()
		}
	}
	if v4 {
		c, err := net.ListenPacket(fmt.Sprintf("ip4:%d", Protocol), "0.0.0.0")
		if err != nil {
			return fmt.Errorf("vrrp listener: ipv4 raw socket: %w", err)
		}
		closers = append(closers, c.Close)
		p := ipv4.NewPacketConn(c)
		if err := l.setup4(p, ifi); err != nil {
			closeAll()
			return err
		}
		loops = append(loops, func() error { return l.read4(p, ifi) })
	}
	if v6 {
		c, err := net.ListenPacket(fmt.Sprintf("ip6:%d", Protocol), "::")
		if err != nil {
			closeAll()
			return fmt.Errorf("vrrp listener: ipv6 raw socket: %w", err)
		}
		closers = append(closers, c.Close)
		p := ipv6.NewPacketConn(c)
		if err := l.setup6(p, ifi); err != nil {
			closeAll()
			return err
		}
		loops = append(loops, func() error { return l.read6(p, ifi) })
	}

	errs := make(chan error, len(loops))
	var wg sync.WaitGroup
	for _, loop := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- loop()
		}()
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errs:
	}
	// Closing the sockets is what unblocks the reads.
	closeAll()
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return first
}

func (l *Listener) setup4(p *ipv4.PacketConn, ifi *net.Interface) error {
	if err := p.JoinGroup(ifi, &net.IPAddr{IP: GroupV4.AsSlice()}); err != nil {
		return fmt.Errorf("vrrp listener: join %s on %s: %w", GroupV4, ifi.Name, err)
	}
	if err := p.SetControlMessage(ipv4.FlagTTL|ipv4.FlagDst|ipv4.FlagInterface, true); err != nil {
		return fmt.Errorf("vrrp listener: ipv4 control messages: %w", err)
	}
	return nil
}

func (l *Listener) setup6(p *ipv6.PacketConn, ifi *net.Interface) error {
	if err := p.JoinGroup(ifi, &net.IPAddr{IP: GroupV6.AsSlice()}); err != nil {
		return fmt.Errorf("vrrp listener: join %s on %s: %w", GroupV6, ifi.Name, err)
	}
	if err := p.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagDst|ipv6.FlagInterface, true); err != nil {
		return fmt.Errorf("vrrp listener: ipv6 control messages: %w", err)
	}
	return nil
}

func (l *Listener) read4(p *ipv4.PacketConn, ifi *net.Interface) error {
	buf := make([]byte, 1500)
	for {
		n, cm, from, err := p.ReadFrom(buf)
		if err != nil {
			return readErr(err)
		}
		if cm == nil || cm.IfIndex != ifi.Index {
			continue // a raw socket sees every interface
		}
		src, dst := ipAddr(from), ipFrom(cm.Dst)
		if cm.TTL != 255 {
			l.invalid(fmt.Errorf("%w: ttl %d from %s", ErrNotVRRP, cm.TTL, src))
			continue
		}
		l.deliver(buf[:n], false, src, dst)
	}
}

func (l *Listener) read6(p *ipv6.PacketConn, ifi *net.Interface) error {
	buf := make([]byte, 1500)
	for {
		n, cm, from, err := p.ReadFrom(buf)
		if err != nil {
			return readErr(err)
		}
		if cm == nil || cm.IfIndex != ifi.Index {
			continue
		}
		src, dst := ipAddr(from), ipFrom(cm.Dst)
		if cm.HopLimit != 255 {
			l.invalid(fmt.Errorf("%w: hop limit %d from %s", ErrNotVRRP, cm.HopLimit, src))
			continue
		}
		l.deliver(buf[:n], true, src, dst)
	}
}

func (l *Listener) deliver(b []byte, v6 bool, src, dst netip.Addr) {
	a, err := ParseAdvert(b, v6, src, dst)
	if err != nil {
		l.invalid(fmt.Errorf("from %s: %w", src, err))
		return
	}
	if l.Handle != nil {
		l.Handle(Observation{Source: src, Advert: a})
	}
}

func (l *Listener) invalid(err error) {
	if l.Invalid != nil {
		l.Invalid(err)
	}
}

func readErr(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return fmt.Errorf("vrrp listener: read: %w", err)
}

func ipAddr(a net.Addr) netip.Addr {
	if ia, ok := a.(*net.IPAddr); ok {
		return ipFrom(ia.IP)
	}
	return netip.Addr{}
}

func ipFrom(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}
