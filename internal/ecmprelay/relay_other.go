//go:build !linux

package ecmprelay

import (
	"context"
	"errors"
	"net/netip"
	"time"
)

// Relay needs Linux.
type Relay struct {
	Relayed func(e Entry, from netip.Addr)
	Failed  func(error)
}

// Update fails off Linux.
func (r *Relay) Update(p Plan, vips []netip.Addr) error {
	if p.Empty() {
		return nil
	}
	return errors.New("ecmp relay: Linux only")
}

// Plan is empty off Linux.
func (r *Relay) Plan() Plan { return Plan{} }

// Close does nothing off Linux.
func (r *Relay) Close() error { return nil }

// Leave tells nobody off Linux.
func (r *Relay) Leave(ctx context.Context, vips []netip.Addr, d time.Duration) (answered, peers int) {
	return 0, 0
}
