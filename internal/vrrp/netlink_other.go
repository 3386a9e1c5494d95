//go:build !linux

package vrrp

import (
	"errors"
	"net/netip"
)

// DeleteAddr is only implemented on Linux, where keepalived runs.
func DeleteAddr(_ string, _ netip.Prefix) error {
	return errors.New("deleting addresses is only supported on linux")
}

// KernelNeighbors knows no neighbours off Linux.
func KernelNeighbors(string) func() map[netip.Addr][]MAC { return nil }
