package mdnsnodes

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/mdns"
	"github.com/infradns/infradns/plugin/apiint"
	"github.com/infradns/infradns/plugin/appswildcard"
	_ "github.com/infradns/infradns/plugin/lbservices"
)

var (
	_ vipHolder = (*apiint.APIInt)(nil)
	_ vipHolder = (*appswildcard.AppsWildcard)(nil)
)

// sibling sets up one directive of a server block, as CoreDNS does, and
// returns its handler.
func sibling(t *testing.T, directive, input string) plugin.Handler {
	t.Helper()
	setup, err := caddy.DirectiveAction("dns", directive)
	if err != nil {
		t.Fatal(err)
	}
	c := caddy.NewTestController("dns", input)
	c.ServerBlockKeys = []string{"ocp4.example.com."}
	if err := setup(c); err != nil {
		t.Fatalf("Setup %s: %v", directive, err)
	}
	cfg := dnsserver.GetConfig(c)
	return cfg.Plugin[len(cfg.Plugin)-1](nil)
}

// TestSiblingVIPs checks that mdnsnodes learns the VIPs of the apiint and
// appswildcard plugins of its server block, and hands them to the cache as
// addresses never to serve.
func TestSiblingVIPs(t *testing.T) {
	api := sibling(t, "apiint", "apiint 192.0.2.5 2001:db8::5 {\n api 192.0.2.6\n}")
	apps := sibling(t, "appswildcard", "appswildcard 192.0.2.10 192.0.2.11 2001:db8::10")
	p := netip.MustParseAddr
	tests := []struct {
		name     string
		handlers []plugin.Handler
		want     []netip.Addr
	}{
		{"no siblings", nil, nil},
		{"apiint: api-int and api", []plugin.Handler{api}, []netip.Addr{p("192.0.2.5"), p("192.0.2.6"), p("2001:db8::5")}},
		{"appswildcard", []plugin.Handler{apps}, []netip.Addr{p("192.0.2.10"), p("192.0.2.11"), p("2001:db8::10")}},
		{"both, each address once", []plugin.Handler{api, apps, api}, []netip.Addr{
			p("192.0.2.5"), p("192.0.2.6"), p("2001:db8::5"), p("192.0.2.10"), p("192.0.2.11"), p("2001:db8::10")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newHandler(t, "mdnsnodes {\n interface eth0\n}")
			m.vips = siblingVIPs(append(tc.handlers, m))
			got := m.filter().Exclude
			slices.SortFunc(got, netip.Addr.Compare)
			want := slices.Clone(tc.want)
			slices.SortFunc(want, netip.Addr.Compare)
			if !slices.Equal(got, want) {
				t.Errorf("Filter excludes %v, want %v", got, want)
			}
		})
	}
}

// TestReservedDNS checks that a node cannot claim the authority's dns label.
func TestReservedDNS(t *testing.T) {
	m := New()
	if !slices.Contains(m.filter().Reserved, "dns") {
		t.Errorf("Reserved %v, want dns among them", m.filter().Reserved)
	}
	if l, ok := m.nodeLabel("dns.ocp4.example.com.", "ocp4.example.com."); ok {
		t.Errorf("nodeLabel(dns) = %q, want not a node label", l)
	}
}

// TestSiblingLabels: lbservices owns lb (or its label's last label) below
// the zone; mdnsnodes serves no node of that name, from mDNS or the API.
func TestSiblingLabels(t *testing.T) {
	lb := sibling(t, "lbservices", "lbservices {\n kubeconfig /dev/null\n label svc.int\n}")
	m := newHandler(t, "mdnsnodes {\n interface eth0\n}")
	m.reserved = withSiblingLabels(m.reserved, []plugin.Handler{lb, m, lb})
	if !slices.Contains(m.filter().Reserved, "int") || slices.Contains(mdns.DefaultReserved, "int") {
		t.Fatalf("Reserved %v, want int among them (and DefaultReserved %v unchanged)", m.filter().Reserved, mdns.DefaultReserved)
	}
	if n := len(m.reserved); n != len(mdns.DefaultReserved)+1 {
		t.Errorf("Reserved %v: want the label once", m.reserved)
	}
	if l, ok := m.nodeLabel("int.ocp4.example.com.", "ocp4.example.com."); ok {
		t.Errorf("nodeLabel(int) = %q, want not a node label", l)
	}
	if got := apiIndex([]cluster.Node{{Name: "int", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}}, m.reserved, nil); len(got) != 0 {
		t.Errorf("a Node named int is served: %v", got)
	}
}
