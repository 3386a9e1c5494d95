package plugintest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreePort is a port on 127.0.0.1 free for every network given ("udp",
// "tcp"), chosen below the kernel's ephemeral range: a port the kernel hands
// out (":0") can be taken by the next outgoing connection of another test's
// process before the server under test binds it (make test saw "bind:
// address already in use" for the TCP half of a port picked over UDP).
func FreePort(t testing.TB, networks ...string) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
next:
	for range 200 {
		port := 10000 + rand.IntN(low-10000)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for _, network := range networks {
			var err error
			if network == "udp" {
				var pc net.PacketConn
				if pc, err = net.ListenPacket("udp", addr); err == nil {
					pc.Close()
				}
			} else {
				var l net.Listener
				if l, err = net.Listen(network, addr); err == nil {
					l.Close()
				}
			}
			if err != nil {
				continue next
			}
		}
		return port
	}
	t.Fatalf("no port free for %v below %d", networks, low)
	return 0
}
