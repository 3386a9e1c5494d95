package lbconfig

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
)

func TestServiceAnnouncer(t *testing.T) {
	a := bgp.NewAnnouncer(nil, nil, log)
	vip := netip.MustParseAddr("192.0.2.5")
	s := &serviceAnnouncer{ann: a, node: "worker-1", own: []netip.Addr{vip}}
	got := func() string { return fmt.Sprint(a.State().Services) }
	s.setNode(cluster.Node{Name: "worker-1"}, true)
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
		{"excluded", func() { s.setNode(cluster.Node{Name: "worker-1", Excluded: true}, true) }, "[]"},
		{"back", func() { s.setNode(cluster.Node{Name: "worker-1"}, true) }, "[{services services [192.0.2.20 192.0.2.22]}]"},
		{"Node deleted", func() { s.setNode(cluster.Node{}, false) }, "[]"},
		{"registered again", func() { s.setNode(cluster.Node{Name: "worker-1"}, true) }, "[{services services [192.0.2.20 192.0.2.22]}]"},
		{"none left", func() { s.setServices(nil) }, "[]"},
	} {
		step.do()
		if g := got(); g != step.want {
			t.Errorf("%s: announcer's Services %s, want %s", step.name, g, step.want)
		}
	}
}

// TestAnnouncedSeries: a withdrawn VIP keeps its bgp_announced series at
// 0; a withdrawn Service address loses its series, so Services that come
// and go leave none behind.
func TestAnnouncedSeries(t *testing.T) {
	t.Cleanup(func() {
		announcedMu.Lock()
		clear(announcedNow)
		clear(announcedKeep)
		announcedMu.Unlock()
		bgpAnnounced.Reset()
	})
	vip, svc := netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("192.0.2.20")
	keepAnnouncedSeries([]netip.Addr{vip})
	announcedMetric([]netip.Prefix{netip.PrefixFrom(vip, 32), netip.PrefixFrom(svc, 32)})
	if v := testutil.ToFloat64(bgpAnnounced.WithLabelValues(svc.String())); v != 1 {
		t.Errorf("Service address announced: %v, want 1", v)
	}
	announcedMetric(nil)
	if n := testutil.CollectAndCount(bgpAnnounced); n != 1 {
		t.Errorf("%d series after both were withdrawn, want the VIP's alone", n)
	}
	if v := testutil.ToFloat64(bgpAnnounced.WithLabelValues(vip.String())); v != 0 {
		t.Errorf("withdrawn VIP: %v, want 0", v)
	}
}
