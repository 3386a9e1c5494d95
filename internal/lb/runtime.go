package lb

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// ServersAt names h's servers whose address is addr: the apiservers of the
// node that has it.
func ServersAt(h HAProxy, addr netip.Addr) []string {
	var out []string
	for _, b := range h.Backends {
		ap, err := netip.ParseAddrPort(b.Address)
		if err == nil && ap.Addr().Unmap() == addr.Unmap() {
			out = append(out, b.Name)
		}
	}
	return out
}

// ServerDownCommand is the runtime command that takes server of backend down
// at once: "set server B/S health down". haproxy's checks keep running and
// bring it back after "rise" passes, so a server that answers again is not
// kept out. The names are the ones this package renders; anything that
// could end the command or start another is refused.
func ServerDownCommand(backend, server string) (string, error) {
	for _, n := range []string{backend, server} {
		if n == "" || strings.ContainsAny(n, " \t\r\n;/#") {
			return "", fmt.Errorf("haproxy runtime: %q is not a backend or server name", n)
		}
	}
	return "set server " + backend + "/" + server + " health down", nil
}

// runtimeTimeout bounds one runtime command: the worker answers at once.
const runtimeTimeout = 2 * time.Second

// Worker sends one runtime API command to haproxy's current worker through
// the master CLI ("@1 CMD"), so no stats socket needs to be configured. The
// worker answers an empty line on success and a message otherwise.
func (m MasterSocket) Worker(ctx context.Context, cmd string) error {
	if strings.ContainsAny(cmd, "\r\n;") {
		return fmt.Errorf("haproxy runtime: one command only: %q", cmd)
	}
	out, err := m.exchange(ctx, "@1 "+cmd, runtimeTimeout)
	if err != nil {
		return fmt.Errorf("haproxy master socket: %w", err)
	}
	if msg := bytes.TrimSpace(out); len(msg) > 0 {
		return fmt.Errorf("haproxy %q: %s", cmd, msg)
	}
	return nil
}
