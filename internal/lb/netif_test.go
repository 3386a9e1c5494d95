package lb

import (
	"net"
	"net/netip"
	"testing"

	"github.com/infradns/infradns/internal/vrrp"
)

// TestInterfaceFor looks up the subnet of this host's own first non-loopback
// address: whatever the machine, that address's network must lead back to
// its interface.
func TestInterfaceFor(t *testing.T) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifi := range ifs {
		if ifi.Flags&net.FlagLoopback != 0 || ifi.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := ifi.Addrs()
		for _, p := range vrrp.Prefixes(addrs) {
			if p.IsSingleIP() || p.Addr().IsLinkLocalUnicast() {
				continue
			}
			// Another address in the same subnet stands in for the VIP.
			vip := p.Masked().Addr().Next()
			if vip == p.Addr() {
				vip = vip.Next()
			}
			name, own, err := InterfaceFor(vip)
			if err != nil {
				t.Fatal(err)
			}
			if name != ifi.Name || len(own) == 0 {
				t.Errorf("InterfaceFor(%s) = %s %v, want %s", vip, name, own, ifi.Name)
			}
			return
		}
	}
	t.Fatal("This host has no non-loopback interface with an address to test with")
}

func TestInterfaceForNone(t *testing.T) {
	if _, _, err := InterfaceFor(netip.MustParseAddr("0.0.0.1")); err == nil {
		t.Error("Expected no interface for 0.0.0.1 (this network, never assigned)")
	}
}
