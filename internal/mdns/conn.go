package mdns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Packet is one received datagram.
type Packet struct {
	Data []byte
	Src  netip.AddrPort
	// HopLimit is the received IP TTL / hop limit, -1 when unknown. mDNS is
	// sent with 255; anything less crossed a router (RFC 6762 11).
	HopLimit int
}

// Conn is the mDNS sockets of one interface, one per family, bound to the
// mDNS port with the port shared, joined to the group on that interface only.
type Conn struct {
	ifi   *net.Interface
	port  int
	p4    *ipv4.PacketConn
	p6    *ipv6.PacketConn
	once  sync.Once
	close error
}

// Listen opens the sockets of ifi. A family that cannot join (no address or
// route of that family yet) is left out; Listen fails only if both fail.
func Listen(ctx context.Context, ifi *net.Interface) (*Conn, error) {
	return listen(ctx, ifi, Port)
}

func listen(ctx context.Context, ifi *net.Interface, port int) (*Conn, error) {
	c := &Conn{ifi: ifi, port: port}
	lc := net.ListenConfig{Control: reuse}
	var errs []error
	if pc, err := lc.ListenPacket(ctx, "udp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(port))); err != nil {
		errs = append(errs, fmt.Errorf("listen ipv4: %w", err))
	} else {
		p := ipv4.NewPacketConn(pc)
		if err := setup4(p, ifi); err != nil {
			pc.Close()
			errs = append(errs, err)
		} else {
			c.p4 = p
		}
	}
	if pc, err := lc.ListenPacket(ctx, "udp6", net.JoinHostPort("::", strconv.Itoa(port))); err != nil {
		errs = append(errs, fmt.Errorf("listen ipv6: %w", err))
	} else {
		p := ipv6.NewPacketConn(pc)
		if err := setup6(p, ifi); err != nil {
			pc.Close()
			errs = append(errs, err)
		} else {
			c.p6 = p
		}
	}
	if c.p4 == nil && c.p6 == nil {
		return nil, fmt.Errorf("mdns sockets on %s: %w", ifi.Name, errors.Join(errs...))
	}
	return c, nil
}

func setup4(p *ipv4.PacketConn, ifi *net.Interface) error {
	if err := p.JoinGroup(ifi, &net.UDPAddr{IP: GroupV4.AsSlice()}); err != nil {
		return fmt.Errorf("join %s on %s: %w", GroupV4, ifi.Name, err)
	}
	for _, err := range []error{
		p.SetMulticastInterface(ifi),
		p.SetMulticastTTL(255),
		p.SetTTL(255),
		p.SetMulticastLoopback(true),
		p.SetControlMessage(ipv4.FlagInterface|ipv4.FlagTTL, true),
	} {
		if err != nil {
			return fmt.Errorf("ipv4 socket options on %s: %w", ifi.Name, err)
		}
	}
	return nil
}

func setup6(p *ipv6.PacketConn, ifi *net.Interface) error {
	if err := p.JoinGroup(ifi, &net.UDPAddr{IP: GroupV6.AsSlice()}); err != nil {
		return fmt.Errorf("join %s on %s: %w", GroupV6, ifi.Name, err)
	}
	for _, err := range []error{
		p.SetMulticastInterface(ifi),
		p.SetMulticastHopLimit(255),
		p.SetHopLimit(255),
		p.SetMulticastLoopback(true),
		p.SetControlMessage(ipv6.FlagInterface|ipv6.FlagHopLimit, true),
	} {
		if err != nil {
			return fmt.Errorf("ipv6 socket options on %s: %w", ifi.Name, err)
		}
	}
	return nil
}

// Families reports which families are open.
func (c *Conn) Families() (v4, v6 bool) { return c.p4 != nil, c.p6 != nil }

// Read delivers datagrams that arrived on the interface to out until the
// sockets are closed or stop is closed; it then returns. Datagrams from other interfaces (the
// sockets are bound to the wildcard address) are dropped.
func (c *Conn) Read(out chan<- Packet, stop <-chan struct{}) {
	var wg sync.WaitGroup
	if c.p4 != nil {
		wg.Go(func() {
			buf := make([]byte, maxPacket)
			for {
				n, cm, src, err := c.p4.ReadFrom(buf)
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					continue
				}
				if cm != nil && cm.IfIndex != c.ifi.Index {
					continue
				}
				hl := -1
				if cm != nil {
					hl = cm.TTL
				}
				if p, ok := toPacket(buf[:n], src, hl); ok {
					select {
					case out <- p:
					case <-stop:
						return
					}
				}
			}
		})
	}
	if c.p6 != nil {
		wg.Go(func() {
			buf := make([]byte, maxPacket)
			for {
				n, cm, src, err := c.p6.ReadFrom(buf)
				if err != nil {
					if errors.Is(err, net.ErrClosed) {
						return
					}
					continue
				}
				if cm != nil && cm.IfIndex != c.ifi.Index {
					continue
				}
				hl := -1
				if cm != nil {
					hl = cm.HopLimit
				}
				if p, ok := toPacket(buf[:n], src, hl); ok {
					select {
					case out <- p:
					case <-stop:
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func toPacket(b []byte, src net.Addr, hl int) (Packet, bool) {
	u, ok := src.(*net.UDPAddr)
	if !ok {
		return Packet{}, false
	}
	ap := u.AddrPort()
	return Packet{Data: append([]byte(nil), b...), Src: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), HopLimit: hl}, true
}

// Multicast sends b to the group of every open family.
func (c *Conn) Multicast(b []byte) error {
	var errs []error
	if c.p4 != nil {
		if _, err := c.p4.WriteTo(b, nil, &net.UDPAddr{IP: GroupV4.AsSlice(), Port: c.port}); err != nil {
			errs = append(errs, fmt.Errorf("send ipv4: %w", err))
		}
	}
	if c.p6 != nil {
		if _, err := c.p6.WriteTo(b, nil, &net.UDPAddr{IP: GroupV6.AsSlice(), Port: c.port, Zone: c.ifi.Name}); err != nil {
			errs = append(errs, fmt.Errorf("send ipv6: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Unicast sends b to dst.
func (c *Conn) Unicast(b []byte, dst netip.AddrPort) error {
	ua := net.UDPAddrFromAddrPort(dst)
	if dst.Addr().Is4() && c.p4 != nil {
		_, err := c.p4.WriteTo(b, nil, ua)
		return err
	}
	if dst.Addr().Is6() && c.p6 != nil {
		if ua.Zone == "" && dst.Addr().IsLinkLocalUnicast() {
			ua.Zone = c.ifi.Name
		}
		_, err := c.p6.WriteTo(b, nil, ua)
		return err
	}
	return fmt.Errorf("no socket for %s", dst)
}

// Close closes the sockets; it is safe to call more than once.
func (c *Conn) Close() error {
	c.once.Do(func() {
		var errs []error
		if c.p4 != nil {
			errs = append(errs, c.p4.Close())
		}
		if c.p6 != nil {
			errs = append(errs, c.p6.Close())
		}
		c.close = errors.Join(errs...)
	})
	return c.close
}
