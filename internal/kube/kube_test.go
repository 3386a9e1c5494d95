package kube_test

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func node(name, ip string, cp bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: name},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.1"},
		}},
	}
	if cp {
		n.Labels["node-role.kubernetes.io/master"] = ""
	}
	return n
}

type ep struct {
	ip, node string
	ready    *bool
}

func slice(ns, name, svc string, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	https := "https"
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &https, Port: &port}},
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.node != "" {
			x.NodeName = &e.node
		}
		s.Endpoints = append(s.Endpoints, x)
	}
	return s
}

var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)

// watch runs a kube.Watcher on the fake clientset and returns the snapshots it
// hands over, and how many.
func watch(t *testing.T, c *fake.Clientset, o kube.Options) (<-chan cluster.Snapshot, *atomic.Int32, *kube.Watcher) {
	t.Helper()
	return watchClient(t, kubefake.FromClientset(c), o)
}

// watchClient is watch on any kube.Client.
func watchClient(t *testing.T, c kube.Client, o kube.Options) (<-chan cluster.Snapshot, *atomic.Int32, *kube.Watcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := kube.New(c, o)
	out := make(chan cluster.Snapshot, 100)
	var calls atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx, func(_ context.Context, s cluster.Snapshot) error {
			calls.Add(1)
			out <- s
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancellation")
		}
	})
	return out, &calls, w
}

// await returns the first snapshot that satisfies ok, failing after 10 s
// (a bound for a stuck watch, not a performance assertion).
func await(t *testing.T, ch <-chan cluster.Snapshot, what string, ok func(cluster.Snapshot) bool) cluster.Snapshot {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case s := <-ch:
			if ok(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("No snapshot with %s", what)
		}
	}
}

func TestWatcher(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(
		node("master-0", "198.51.100.11", true),
		node("master-1", "198.51.100.12", true),
		slice("default", "kubernetes", "kubernetes", 6443, ep{"198.51.100.11", "", nil}, ep{"198.51.100.12", "", yes}),
		slice("openshift-ingress", "router-a", "router-internal-default", 1936, ep{"10.128.0.5", "master-1", yes}),
		// Another IngressController's shard: never an ingress VIP holder.
		slice("openshift-ingress", "router-shard", "router-internal-shard", 1936, ep{"10.128.0.6", "master-0", yes}),
		// A slice of another service in default: not an apiserver.
		slice("default", "other", "other", 443, ep{"198.51.100.99", "", yes}),
	)
	ch, _, w := watch(t, c, kube.NewOptions())

	s := await(t, ch, "the initial state", func(s cluster.Snapshot) bool { return len(s.Nodes) == 2 })
	if !w.HasSynced() {
		t.Error("HasSynced is false after the first snapshot")
	}
	want := cluster.Snapshot{
		Nodes: []cluster.Node{
			{Name: "master-0", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.11")}},
			{Name: "master-1", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.12")}},
		},
		APIServers:   []netip.AddrPort{netip.MustParseAddrPort("198.51.100.11:6443"), netip.MustParseAddrPort("198.51.100.12:6443")},
		IngressNodes: []string{"master-1"},
	}
	assertSnapshot(t, s, want)

	// Create: a worker joins and runs a router.
	if _, err := c.CoreV1().Nodes().Create(ctx, node("worker-0", "198.51.100.21", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DiscoveryV1().EndpointSlices("openshift-ingress").Update(ctx,
		slice("openshift-ingress", "router-a", "router-internal-default", 1936,
			ep{"10.128.0.5", "master-1", yes}, ep{"10.131.0.5", "worker-0", nil}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = await(t, ch, "worker-0 as node and router", func(s cluster.Snapshot) bool {
		return len(s.Nodes) == 3 && slices.Contains(s.IngressNodes, "worker-0")
	})
	if s.Nodes[2].ControlPlane {
		t.Error("worker-0 is control plane")
	}

	// Update: an apiserver stops being ready.
	if _, err := c.DiscoveryV1().EndpointSlices("default").Update(ctx,
		slice("default", "kubernetes", "kubernetes", 6443, ep{"198.51.100.11", "", no}, ep{"198.51.100.12", "", yes}),
		metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = await(t, ch, "one ready apiserver", func(s cluster.Snapshot) bool { return len(s.APIServers) == 1 })
	if s.APIServers[0] != netip.MustParseAddrPort("198.51.100.12:6443") {
		t.Errorf("APIServers = %v", s.APIServers)
	}

	// Delete: a node goes away.
	if err := c.CoreV1().Nodes().Delete(ctx, "master-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s = await(t, ch, "master-0 gone", func(s cluster.Snapshot) bool { return len(s.Nodes) == 2 })
	if s.Nodes[0].Name != "master-1" {
		t.Errorf("Nodes = %v", s.Nodes)
	}
}

// TestWatcherCoalesces creates many objects in one burst and checks they
// arrive in far fewer renders than events.
func TestWatcherCoalesces(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	o := kube.NewOptions()
	o.Debounce = 200 * time.Millisecond
	ch, calls, _ := watch(t, c, o)
	await(t, ch, "the empty initial state", func(s cluster.Snapshot) bool { return true })
	const n = 50
	for i := 0; i < n; i++ {
		name := "node-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, err := c.CoreV1().Nodes().Create(ctx, node(name, "198.51.100.1", false), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	await(t, ch, "all nodes", func(s cluster.Snapshot) bool { return len(s.Nodes) == n })
	if got := calls.Load(); got >= n {
		t.Errorf("%d renders for %d events: bursts are not coalesced", got, n)
	}
	t.Logf("%d events → %d renders", n, calls.Load())
}

// TestWatcherRetries checks a failing handler is called again with no new
// event (a reload that failed is retried with backoff).
func TestWatcherRetries(t *testing.T) {
	c := fake.NewClientset(node("master-0", "198.51.100.11", true))
	o := kube.NewOptions()
	o.RetryBase = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	ok := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- kube.New(kubefake.FromClientset(c), o).Run(ctx, func(context.Context, cluster.Snapshot) error {
			if calls.Add(1) < 3 {
				return context.DeadlineExceeded // any error
			}
			close(ok)
			return nil
		})
	}()
	select {
	case <-ok:
	case <-time.After(10 * time.Second):
		t.Fatalf("Handler called %d times, want a third call after two failures", calls.Load())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func assertSnapshot(t *testing.T, got, want cluster.Snapshot) {
	t.Helper()
	if len(got.Nodes) != len(want.Nodes) {
		t.Fatalf("Nodes = %+v, want %+v", got.Nodes, want.Nodes)
	}
	for i := range got.Nodes {
		g, w := got.Nodes[i], want.Nodes[i]
		if g.Name != w.Name || g.ControlPlane != w.ControlPlane || !slices.Equal(g.Addresses, w.Addresses) {
			t.Errorf("Node %d = %+v, want %+v", i, g, w)
		}
	}
	if !slices.Equal(got.APIServers, want.APIServers) {
		t.Errorf("APIServers = %v, want %v", got.APIServers, want.APIServers)
	}
	if !slices.Equal(got.IngressNodes, want.IngressNodes) {
		t.Errorf("IngressNodes = %v, want %v", got.IngressNodes, want.IngressNodes)
	}
}

// TestWatcherNodesOnly checks NodesOnly needs no ingress service, watches no
// EndpointSlice (an identity allowed to read Nodes only is enough) and still
// follows creations, address changes and deletions.
func TestWatcherNodesOnly(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(
		node("master-0", "198.51.100.11", true),
		slice("default", "kubernetes", "kubernetes", 6443, ep{"198.51.100.11", "", yes}),
	)
	o := kube.NewOptions()
	o.NodesOnly = true
	o.IngressNamespace, o.IngressService = "", ""
	ch, _, w := watch(t, c, o)

	s := await(t, ch, "the initial state", func(s cluster.Snapshot) bool { return len(s.Nodes) == 1 })
	if !w.HasSynced() {
		t.Error("HasSynced is false after the first snapshot")
	}
	assertSnapshot(t, s, cluster.Snapshot{Nodes: []cluster.Node{
		{Name: "master-0", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.11")}},
	}})

	n := node("master-0", "198.51.100.12", true)
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "the new address", func(s cluster.Snapshot) bool {
		return len(s.Nodes) == 1 && slices.Equal(s.Nodes[0].Addresses, []netip.Addr{netip.MustParseAddr("198.51.100.12")})
	})
	if err := c.CoreV1().Nodes().Delete(ctx, "master-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "master-0 gone", func(s cluster.Snapshot) bool { return len(s.Nodes) == 0 })

	for _, a := range c.Actions() {
		if a.GetResource().Resource != "nodes" {
			t.Errorf("NodesOnly watcher touched %s (%s)", a.GetResource().Resource, a.GetVerb())
		}
	}
}
