//go:build !linux

package vrrp

import (
	"context"
	"errors"
	"net/netip"
)

// NDPConn needs Linux packet sockets.
type NDPConn struct {
	Table     *NeighborTable
	Announced func(ip netip.Addr, mac MAC)
}

// OpenNDP fails off Linux.
func OpenNDP(string, *NeighborTable) (*NDPConn, error) { return nil, errors.New("ndp: Linux only") }

func (n *NDPConn) MAC() MAC                      { return MAC{} }
func (n *NDPConn) Ask(netip.Addr) error          { return errors.New("ndp: Linux only") }
func (n *NDPConn) Announce(netip.Addr) error     { return errors.New("ndp: Linux only") }
func (n *NDPConn) Run(ctx context.Context) error { return errors.New("ndp: Linux only") }
