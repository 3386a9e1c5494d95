package mdnsnodes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"
	"github.com/infradns/infradns/internal/mdns"
	"github.com/infradns/infradns/internal/records"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// set builds a records.Set the way the mDNS cache and apiIndex do (4-byte
// IPv4), from addresses of both families in any order.
func set(ss ...string) records.Set {
	var s records.Set
	for _, a := range addrs(ss...) {
		if a.Is4() {
			s.V4 = append(s.V4, a.AsSlice())
		} else {
			s.V6 = append(s.V6, a.AsSlice())
		}
	}
	return s
}

func sameSet(a, b records.Set) bool {
	eq := func(x, y []net.IP) bool { return slices.EqualFunc(x, y, net.IP.Equal) }
	return eq(a.V4, b.V4) && eq(a.V6, b.V6)
}

func TestMerge(t *testing.T) {
	tests := []struct {
		name  string
		heard map[string]records.Set // nil: mDNS has published nothing
		nodes []cluster.Node
		want  map[string]records.Set
		api   int // labels apiIndex keeps
		// signed: the plugin has a key, so every announcement heard was
		// signed by a node.
		signed bool
	}{
		{name: "nothing", want: map[string]records.Set{}},
		{name: "mDNS only",
			heard: map[string]records.Set{"master-0": set("198.51.100.11")},
			want:  map[string]records.Set{"master-0": set("198.51.100.11")}},
		{name: "API only",
			nodes: []cluster.Node{{Name: "master-0", Addresses: addrs("198.51.100.11")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11")}, api: 1},
		{name: "both, other addresses, signed: mDNS wins the whole answer",
			heard: map[string]records.Set{"master-0": set("198.51.100.12")},
			nodes: []cluster.Node{{Name: "master-0", Addresses: addrs("198.51.100.11", "2001:db8:1::11")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.12")}, api: 1, signed: true},
		// Without a key anyone on the link can announce master-0: the
		// Node the cluster registered wins, mDNS keeps the names the API
		// does not know.
		{name: "both, other addresses, unsigned: the API wins the whole answer",
			heard: map[string]records.Set{"master-0": set("198.51.100.12"), "master-1": set("198.51.100.13")},
			nodes: []cluster.Node{{Name: "master-0", Addresses: addrs("198.51.100.11", "2001:db8:1::11")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11", "2001:db8:1::11"), "master-1": set("198.51.100.13")}, api: 1},
		{name: "both, each with its own nodes, signed",
			heard: map[string]records.Set{"master-0": set("198.51.100.11")},
			nodes: []cluster.Node{{Name: "master-0", Addresses: addrs("198.51.100.11")}, {Name: "worker-0", Addresses: addrs("198.51.100.21")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11"), "worker-0": set("198.51.100.21")}, api: 2, signed: true},
		{name: "both, each with its own nodes",
			heard: map[string]records.Set{"master-0": set("198.51.100.11")},
			nodes: []cluster.Node{{Name: "master-0", Addresses: addrs("198.51.100.11")}, {Name: "worker-0", Addresses: addrs("198.51.100.21")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11"), "worker-0": set("198.51.100.21")}, api: 2},
		{name: "FQDN Node name serves its first label",
			nodes: []cluster.Node{{Name: "master-0.ocp4.example.com", Addresses: addrs("198.51.100.11")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11")}, api: 1},
		{name: "upper case is lowered",
			nodes: []cluster.Node{{Name: "Master-0.OCP4.example.com", Addresses: addrs("198.51.100.11")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11")}, api: 1},
		{name: "invalid label",
			nodes: []cluster.Node{
				{Name: "node_0", Addresses: addrs("198.51.100.11")},
				{Name: "-node", Addresses: addrs("198.51.100.12")},
				{Name: strings.Repeat("a", 64), Addresses: addrs("198.51.100.13")},
				{Name: ".ocp4.example.com", Addresses: addrs("198.51.100.14")},
			},
			want: map[string]records.Set{}},
		{name: "reserved labels",
			nodes: []cluster.Node{
				{Name: "api", Addresses: addrs("198.51.100.11")},
				{Name: "api-int.ocp4.example.com", Addresses: addrs("198.51.100.12")},
				{Name: "apps", Addresses: addrs("198.51.100.13")},
				{Name: "dns.ocp4.example.com", Addresses: addrs("198.51.100.14")},
			},
			want: map[string]records.Set{}},
		{name: "node without InternalIP skipped",
			nodes: []cluster.Node{{Name: "worker-0"}, {Name: "worker-1", Addresses: addrs("198.51.100.22")}},
			want:  map[string]records.Set{"worker-1": set("198.51.100.22")}, api: 1},
		{name: "unusable addresses dropped, node without a usable one skipped",
			nodes: []cluster.Node{
				{Name: "worker-0", Addresses: addrs("0.0.0.0", "224.0.0.251")},
				{Name: "worker-1", Addresses: addrs("::", "198.51.100.22", "198.51.100.22", "fe80::1%eth0")},
			},
			want: map[string]records.Set{"worker-1": set("198.51.100.22")}, api: 1},
		{name: "IPv4 and IPv6, sorted per family",
			nodes: []cluster.Node{{Name: "master-0", Addresses: addrs("2001:db8:1::11", "198.51.100.12", "::ffff:198.51.100.11")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11", "198.51.100.12", "2001:db8:1::11")}, api: 1},
		{name: "two Nodes for one label: the first name wins, in any order",
			nodes: []cluster.Node{
				{Name: "master-0.ocp4.example.com", Addresses: addrs("198.51.100.12")},
				{Name: "master-0", Addresses: addrs("198.51.100.11")},
			},
			want: map[string]records.Set{"master-0": set("198.51.100.11")}, api: 1},
		{name: "two Nodes for one label: the first name without an address does not hide the other",
			nodes: []cluster.Node{{Name: "master-0"}, {Name: "master-0.ocp4.example.com", Addresses: addrs("198.51.100.12")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.12")}, api: 1},
		{name: "a VIP a Node lists is no node address",
			nodes: []cluster.Node{{Name: "master-0", Addresses: addrs("198.51.100.11", "192.0.2.5")}, {Name: "master-1", Addresses: addrs("192.0.2.10")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11")}, api: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var heard *nodeIndex
			if tc.heard != nil {
				heard = &nodeIndex{nodes: tc.heard}
			}
			api := apiIndex(tc.nodes, mdns.DefaultReserved, addrs("192.0.2.5", "192.0.2.10"))
			if len(api) != tc.api {
				t.Errorf("apiIndex kept %d labels %v, want %d", len(api), api, tc.api)
			}
			got := merge(heard, api, tc.signed)
			if got == nil {
				t.Fatal("merge returned nil")
			}
			if got.Len() != len(tc.want) {
				t.Errorf("Served %v, want %v", got.nodes, tc.want)
			}
			for l, w := range tc.want {
				if g, ok := got.Lookup(l); !ok || !sameSet(g, w) {
					t.Errorf("%s: %v, want %v", l, g, w)
				}
			}
			// The inputs are snapshots other readers share.
			if tc.heard != nil && len(heard.nodes) != len(tc.heard) {
				t.Error("merge modified the mDNS index")
			}
		})
	}
}

// answer asks m as a client would and returns the reply (nil: the server's
// own SERVFAIL, before readiness).
func answer(t *testing.T, m *MDNSNodes, name string, qtype uint16) *dns.Msg {
	t.Helper()
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := m.ServeDNS(context.Background(), rec, test.Case{Qname: name, Qtype: qtype}.Msg()); err != nil {
		t.Fatalf("ServeDNS: %v", err)
	}
	return rec.Msg
}

// got is an answer in short form: "NXDOMAIN", "NOERROR 198.51.100.11 ...",
// "SERVFAIL" for no reply.
func got(r *dns.Msg) string {
	if r == nil {
		return "SERVFAIL"
	}
	out := []string{dns.RcodeToString[r.Rcode]}
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, rr.AAAA.String())
		}
	}
	return strings.Join(out, " ")
}

// eventually polls the answer until it is want; the bound is for a stuck
// watch, not a performance assertion (the e2e test measures).
func eventually(t *testing.T, m *MDNSNodes, name string, qtype uint16, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		g := got(answer(t, m, name, qtype))
		if g == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: %q, want %q", name, dns.TypeToString[qtype], g, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func apiNode(name string, ips ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, ip := range ips {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	// Not served: only InternalIPs are.
	n.Status.Addresses = append(n.Status.Addresses,
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
		corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

// startAPI runs m's watch on the fake clientset c, with a kubeconfig name of
// its own so no other test's hand-over reaches it.
func startAPI(t *testing.T, corefile string, c *fake.Clientset) *MDNSNodes {
	t.Helper()
	m := newHandler(t, corefile)
	m.newClient = func() (kube.Client, error) { return kubefake.FromClientset(c), nil }
	if err := m.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(m.Stop)
	return m
}

func apiCorefile(t *testing.T, extra string) string {
	return fmt.Sprintf("mdnsnodes {\n kubeconfig /nonexistent/%s\n%s}", t.Name(), extra)
}

// TestAPIWatch follows a Node through its life with the API as the only
// source: created, its address changed by the kubelet, deleted.
func TestAPIWatch(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(apiNode("master-0", "198.51.100.11"))
	m := startAPI(t, apiCorefile(t, ""), c)
	nodes := c.CoreV1().Nodes()

	eventually(t, m, "master-0.ocp4.example.com.", dns.TypeA, "NOERROR 198.51.100.11")
	if !m.Ready() {
		t.Error("Not ready after the first list")
	}

	// Create, with both families.
	if _, err := nodes.Create(ctx, apiNode("worker-0", "198.51.100.21", "2001:db8:1::21"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, m, "worker-0.ocp4.example.com.", dns.TypeA, "NOERROR 198.51.100.21")
	eventually(t, m, "worker-0.ocp4.example.com.", dns.TypeAAAA, "NOERROR 2001:db8:1::21")

	// The kubelet updates status.addresses: the new address, the old one gone.
	n, err := nodes.Get(ctx, "worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = apiNode("worker-0", "198.51.100.22").Status.Addresses
	if _, err := nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, m, "worker-0.ocp4.example.com.", dns.TypeA, "NOERROR 198.51.100.22")
	if g := got(answer(t, m, "worker-0.ocp4.example.com.", dns.TypeAAAA)); g != "NOERROR" {
		t.Errorf("AAAA after the IPv6 address went: %q, want NODATA", g)
	}

	// A Node named with its FQDN answers by its first label.
	if _, err := nodes.Create(ctx, apiNode("worker-1.ocp4.example.com", "198.51.100.23"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, m, "Worker-1.ocp4.example.com.", dns.TypeA, "NOERROR 198.51.100.23")
	if g := got(answer(t, m, "worker-1.ocp4.example.com.ocp4.example.com.", dns.TypeA)); g != "NXDOMAIN" {
		t.Errorf("The full Node name below the zone: %q, want NXDOMAIN", g)
	}

	// Delete.
	if err := nodes.Delete(ctx, "worker-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, m, "worker-0.ocp4.example.com.", dns.TypeA, "NXDOMAIN")
	eventually(t, m, "worker-0.ocp4.example.com.", dns.TypeAAAA, "NXDOMAIN")
	if g := got(answer(t, m, "master-0.ocp4.example.com.", dns.TypeA)); g != "NOERROR 198.51.100.11" {
		t.Errorf("master-0 after another Node's deletion: %q", g)
	}
}

// TestAPIAndMDNS checks the merge at the plugin. With a key (what mDNS
// serves was signed by a node) what mDNS hears wins for a name it knows;
// without one the API's Node wins, since any host on the link could have
// announced it. Either way the API fills in the names mDNS does not know and
// mDNS the names the API does not know, and a name mDNS stops hearing falls
// back to the API's addresses.
func TestAPIAndMDNS(t *testing.T) {
	for _, tc := range []struct {
		name   string
		signed bool
		// What master-0 (moved, announced at .12; its Node says .11) and
		// master-1 (announced at .13, then created as a Node at .99) answer.
		master0, master1 string
	}{
		{"signed: mDNS wins", true, "NOERROR 198.51.100.12", "NOERROR 198.51.100.13"},
		{"unsigned: the API wins", false, "NOERROR 198.51.100.11", "NOERROR 198.51.100.99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			extra := ""
			if tc.signed {
				key := filepath.Join(t.TempDir(), "mdns.key")
				if err := os.WriteFile(key, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				extra = " key " + key + "\n"
			}
			c := fake.NewClientset(apiNode("master-0", "198.51.100.11"), apiNode("worker-0", "198.51.100.21"))
			m := startAPI(t, apiCorefile(t, extra), c)
			if m.signed() != tc.signed {
				t.Fatalf("signed() = %v, want %v", m.signed(), tc.signed)
			}
			eventually(t, m, "worker-0.ocp4.example.com.", dns.TypeA, "NOERROR 198.51.100.21")

			// What the browser's OnHeard does: master-0 has moved and announced it,
			// master-1 is not (yet) a Node.
			hear := func(nodes map[string]records.Set) {
				m.heard.Store(&nodeIndex{nodes: nodes})
				m.publish()
			}
			hear(map[string]records.Set{"master-0": set("198.51.100.12"), "master-1": set("198.51.100.13")})
			for name, want := range map[string]string{"master-0": tc.master0, "master-1": "NOERROR 198.51.100.13", "worker-0": "NOERROR 198.51.100.21"} {
				if g := got(answer(t, m, name+".ocp4.example.com.", dns.TypeA)); g != want {
					t.Errorf("%s: %q, want %q", name, g, want)
				}
			}

			// An API change: master-1 becomes a Node, master-0's is deleted.
			if _, err := c.CoreV1().Nodes().Create(ctx, apiNode("master-1", "198.51.100.99"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := c.CoreV1().Nodes().Delete(ctx, "master-0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				if api := m.api.Load(); api != nil && len(*api) == 2 && (*api)["master-1"].V4 != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("The API change did not arrive")
				}
				time.Sleep(5 * time.Millisecond)
			}
			// master-0 is still heard: served from mDNS either way.
			for name, want := range map[string]string{"master-0": "NOERROR 198.51.100.12", "master-1": tc.master1} {
				if g := got(answer(t, m, name+".ocp4.example.com.", dns.TypeA)); g != want {
					t.Errorf("%s after the API change: %q, want %q", name, g, want)
				}
			}

			// mDNS hears goodbyes: master-1 falls back to the API, master-0 is gone from both.
			hear(map[string]records.Set{})
			for name, want := range map[string]string{"master-0": "NXDOMAIN", "master-1": "NOERROR 198.51.100.99", "worker-0": "NOERROR 198.51.100.21"} {
				if g := got(answer(t, m, name+".ocp4.example.com.", dns.TypeA)); g != want {
					t.Errorf("%s after the goodbyes: %q, want %q", name, g, want)
				}
			}
			if g := testutil.ToFloat64(sourceNodes.WithLabelValues(m.zonesLabel(), sourceAPI)); g != 2 {
				t.Errorf("source_nodes{source=api} = %v, want 2", g)
			}
			if g := testutil.ToFloat64(nodes.WithLabelValues(m.zonesLabel())); g != 2 {
				t.Errorf("nodes = %v, want 2", g)
			}
		})
	}
}

// TestAPINotReady checks that with the API as the only source and no list
// yet, node names get SERVFAIL rather than a cacheable NXDOMAIN, and that
// Stop ends the client retries at once.
func TestAPINotReady(t *testing.T) {
	m := newHandler(t, apiCorefile(t, ""))
	m.newClient = func() (kube.Client, error) { return nil, errors.New("no kubeconfig yet") }
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if m.Ready() {
		t.Error("Ready without a Node list")
	}
	if g := got(answer(t, m, "master-0.ocp4.example.com.", dns.TypeA)); g != "SERVFAIL" {
		t.Errorf("Before the first list: %q, want SERVFAIL", g)
	}
	// Names that are not node names do not wait for the API.
	if g := got(answer(t, m, "ocp4.example.com.", dns.TypeSOA)); g != "NOERROR" {
		t.Errorf("Apex SOA before the first list: %q", g)
	}
	stopped := make(chan struct{})
	go func() { m.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not end the client retries")
	}
}

// TestAPIHandOver is a reload during an API outage: the new instance has no
// list of its own and gets none while the API is down, so it serves the list
// the old instance had.
func TestAPIHandOver(t *testing.T) {
	c := fake.NewClientset(apiNode("master-0", "198.51.100.11"))
	corefile := apiCorefile(t, "")
	old := startAPI(t, corefile, c)
	eventually(t, old, "master-0.ocp4.example.com.", dns.TypeA, "NOERROR 198.51.100.11")

	m := newHandler(t, corefile)
	m.newClient = func() (kube.Client, error) { return nil, errors.New("API down") }
	if err := m.Start(); err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	old.Stop()
	if !m.Ready() {
		t.Error("Not ready with the old instance's list")
	}
	for name, want := range map[string]string{"master-0": "NOERROR 198.51.100.11", "master-9": "NXDOMAIN"} {
		if g := got(answer(t, m, name+".ocp4.example.com.", dns.TypeA)); g != want {
			t.Errorf("%s after the reload: %q, want %q", name, g, want)
		}
	}

	// Another kubeconfig is another cluster: nothing to take over.
	other := newHandler(t, "mdnsnodes {\n kubeconfig /nonexistent/other-"+t.Name()+"\n}")
	other.newClient = m.newClient
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Stop()
	if other.Ready() {
		t.Error("Ready with another kubeconfig's list")
	}
}

// TestAPIStopLeaks starts and stops the watch (fake API and missing
// kubeconfig) and checks every goroutine has ended.
func TestAPIStopLeaks(t *testing.T) {
	g0 := runtime.NumGoroutine()
	for i := range 3 {
		c := fake.NewClientset(apiNode("master-0", "198.51.100.11"))
		m := newHandler(t, fmt.Sprintf("mdnsnodes {\n kubeconfig /nonexistent/%s-%d\n}", t.Name(), i))
		m.newClient = func() (kube.Client, error) { return kubefake.FromClientset(c), nil }
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, m, "master-0.ocp4.example.com.", dns.TypeA, "NOERROR 198.51.100.11")
		m.Stop()
		m.Stop() // twice: a no-op

		missing := newHandler(t, fmt.Sprintf("mdnsnodes {\n kubeconfig /nonexistent/%s-missing-%d\n}", t.Name(), i))
		if err := missing.Start(); err != nil {
			t.Fatal(err)
		}
		missing.Stop()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > g0 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines after Stop, was %d\n%s", runtime.NumGoroutine(), g0, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}
