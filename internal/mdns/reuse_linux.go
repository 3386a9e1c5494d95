package mdns

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// reuse lets several processes share port 5353 on one host: the publisher,
// CoreDNS (old and new instance during a reload) and avahi. Each gets a copy
// of every multicast datagram.
func reuse(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); serr != nil {
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	})
	if err != nil {
		return err
	}
	return serr
}
