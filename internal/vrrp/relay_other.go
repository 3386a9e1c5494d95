//go:build !linux

package vrrp

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

// Relay needs Linux.
type Relay struct {
	Interface string
	VIPs      []netip.Addr
	For       time.Duration
	Live      time.Duration
	Own       func(netip.Addr) bool
	Relayed   func(vip, to netip.Addr)
	Failed    func(error)
}

// Run fails off Linux.
func (r *Relay) Run(ctx context.Context) error { return errors.New("relay: Linux only") }

// Observe does nothing off Linux.
func (r *Relay) Observe(Observation) {}

// TakenOver does nothing off Linux.
func (r *Relay) TakenOver(vip, from netip.Addr, d time.Duration) bool { return false }

// Announced does nothing off Linux.
func (r *Relay) Announced(vip, by netip.Addr) bool { return false }

// Advertised does nothing off Linux.
func (r *Relay) Advertised(Observation) {}
