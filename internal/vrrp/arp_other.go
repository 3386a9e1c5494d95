//go:build !linux

package vrrp

import (
	"context"
	"errors"
	"net/netip"
)

// ARPConn needs Linux packet sockets.
type ARPConn struct {
	Table     *NeighborTable
	Announced func(ip netip.Addr, mac MAC)
}

// OpenARP fails off Linux.
func OpenARP(string, *NeighborTable) (*ARPConn, error) { return nil, errors.New("arp: Linux only") }

func (c *ARPConn) MAC() MAC                         { return MAC{} }
func (c *ARPConn) Ask(netip.Addr, netip.Addr) error { return errors.New("arp: Linux only") }
func (c *ARPConn) Announce(netip.Addr) error        { return errors.New("arp: Linux only") }
func (c *ARPConn) Run(ctx context.Context) error    { return errors.New("arp: Linux only") }
