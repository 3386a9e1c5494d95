//go:build !linux

package vrrp

import (
	"context"
	"errors"
)

// Reader needs Linux packet sockets.
type Reader struct {
	Interface string
	Handle    func(Observation)
	Invalid   func(error)
}

// Run fails off Linux.
func (r *Reader) Run(ctx context.Context) error { return errors.New("vrrp reader: Linux only") }
