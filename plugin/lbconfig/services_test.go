package lbconfig

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
)

func TestServiceAnnouncer(t *testing.T) {
	a := bgp.NewAnnouncer(nil, nil, log)
	vip := netip.MustParseAddr("192.0.2.5")
	s := &serviceAnnouncer{ann: a, node: "worker-1", own: []netip.Addr{vip}}
	got := func() string { return fmt.Sprint(a.State().Services) }
	s.setExcluded(false)
	if g := got(); g != "[]" {
		t.Errorf("before the first list: %s", g)
	}
	svcs := []cluster.LBService{
		{Namespace: "shop", Name: "web", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.20")}},
		{Namespace: "shop", Name: "db", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.21")}, Local: true, Nodes: []string{"worker-2"}},
		{Namespace: "shop", Name: "cache", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.22")}, Local: true, Nodes: []string{"worker-1"}},
		// Claims the API VIP in its status: never announced for it.
		{Namespace: "evil", Name: "squat", Addrs: []netip.Addr{vip}},
	}
	for _, step := range []struct {
		name string
		do   func()
		want string
	}{
		{"listed", func() { s.setServices(svcs) }, "[{services services [192.0.2.20 192.0.2.22]}]"},
		{"excluded", func() { s.setExcluded(true) }, "[]"},
		{"back", func() { s.setExcluded(false) }, "[{services services [192.0.2.20 192.0.2.22]}]"},
		{"none left", func() { s.setServices(nil) }, "[]"},
	} {
		step.do()
		if g := got(); g != step.want {
			t.Errorf("%s: announcer's Services %s, want %s", step.name, g, step.want)
		}
	}
}
