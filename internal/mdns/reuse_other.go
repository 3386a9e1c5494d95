//go:build !linux

package mdns

import "syscall"

// reuse is a no-op outside Linux: the port is then not shared.
func reuse(_, _ string, _ syscall.RawConn) error { return nil }
