//go:build !linux

package vrrp

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

// Drainer needs Linux.
type Drainer struct {
	Interface string
	VIPs      []netip.Addr
	Drain     time.Duration
	Kept      func(netip.Prefix)
	Failed    func(netip.Prefix, error)
	Changed   func()
	Arrived   func(netip.Prefix)
}

// Run fails off Linux.
func (d *Drainer) Run(ctx context.Context) error { return errors.New("drain: Linux only") }

// SetStandby does nothing off Linux.
func (d *Drainer) SetStandby(vips []netip.Addr, on bool) {}

// Holding reports nothing off Linux.
func (d *Drainer) Holding() (held, draining bool) { return false, false }
