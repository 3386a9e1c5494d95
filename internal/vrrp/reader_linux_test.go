package vrrp

import (
	"context"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/lb/netnstest"
)

// TestReaderKeepalived runs a real keepalived (vrrp_version 3, advert_int
// 0.1) in one network namespace made for the test and the Reader in a
// second one on the same veth link, and checks the adverts it decodes: the
// parser and the socket code against the real sender, for both families,
// with the frame's source MAC.
func TestReaderKeepalived(t *testing.T) {
	router, reader := netnstest.Pair(t, "vrrp")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	startKeepalived(t, ctx, router, `global_defs {
    vrrp_version 3
}
vrrp_instance idnsv_v4 {
    state BACKUP
    interface eth0
    virtual_router_id 14
    priority 140
    advert_int 0.1
    virtual_ipaddress {
        192.0.2.5/32
    }
}
vrrp_instance idnsv_v6 {
    state BACKUP
    interface eth0
    virtual_router_id 14
    priority 140
    advert_int 0.1
    virtual_ipaddress {
        2001:db8::5/128
    }
}
`)
	var routerMAC MAC
	copy(routerMAC[:], macOf(t, router))

	var mu sync.Mutex
	seen := map[bool]Observation{}
	got := make(chan struct{})
	r := &Reader{Interface: "eth0", Handle: func(o Observation) {
		mu.Lock()
		defer mu.Unlock()
		o.Advert.Addresses = slices.Clone(o.Advert.Addresses) // the reader reuses it
		seen[o.Source.Is6()] = o
		if len(seen) == 2 {
			select {
			case <-got:
			default:
				close(got)
			}
		}
	}, Invalid: func(err error) { t.Logf("Invalid packet: %v", err) }}

	rctx, rcancel := context.WithCancel(ctx)
	// Run opens the sockets, on a thread inside the reader's namespace.
	_, runErr := runIn(t, rctx, reader, func() (*Reader, error) { return r, nil })
	select {
	case <-got:
	case err := <-runErr:
		t.Fatalf("Reader stopped early: %v", err)
	case <-ctx.Done():
		t.Fatal("No adverts of both families within 20 s")
	}
	rcancel()
	if err := <-runErr; err != nil {
		t.Fatalf("Run: %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	v4, v6 := seen[false], seen[true]
	if v4.Source != netip.MustParseAddr("198.51.100.11") {
		t.Errorf("IPv4 source = %s", v4.Source)
	}
	if !v6.Source.IsLinkLocalUnicast() {
		t.Errorf("IPv6 source = %s, want the router's link-local address", v6.Source)
	}
	for fam, o := range map[string]Observation{"v4": v4, "v6": v6} {
		a := o.Advert
		if a.Version != 3 || a.VRID != 14 || a.Priority != 140 || a.Interval != 100*time.Millisecond {
			t.Errorf("%s advert = %+v", fam, a)
		}
		if o.MAC != routerMAC {
			t.Errorf("%s advert from MAC %s, want the router's %s", fam, o.MAC, routerMAC)
		}
	}
	if len(v4.Advert.Addresses) != 1 || v4.Advert.Addresses[0] != netip.MustParseAddr("192.0.2.5") {
		t.Errorf("IPv4 addresses = %v", v4.Advert.Addresses)
	}
	if g := globalAddrs(v6.Advert.Addresses); len(g) != 1 || g[0] != netip.MustParseAddr("2001:db8::5") {
		t.Errorf("IPv6 addresses = %v", v6.Advert.Addresses)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
