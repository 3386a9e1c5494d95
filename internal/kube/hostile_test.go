package kube_test

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// injection is what a review fed through an InternalIP's IPv6 zone: text
// that, written raw into keepalived.conf, closes the unicast_peer block and
// adds a script for root to run.
const injection = "fd00::3%eth0}\n notify_master \"/bin/sh -c id\"\n{"

// TestWatcherDropsHostileValues feeds hostile values through every field
// the API gives the render (Node names, InternalIPs, EndpointSlice addresses,
// ports and node names) and checks that none reaches a snapshot and each is
// reported once, with its reason.
func TestWatcherDropsHostileValues(t *testing.T) {
	evil := node("master-2", "198.51.100.13", true)
	evil.Status.Addresses = append(evil.Status.Addresses,
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: injection},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::3%eth0"},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "0.0.0.0"},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "224.0.0.18"},
		corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "master-2.example.com"})
	c := fake.NewClientset(
		node("master-0", "198.51.100.11", true),
		node("master-1\nnotify_master", "198.51.100.12", true),
		evil,
		slice("default", "kubernetes", "kubernetes", 6443, ep{"198.51.100.11", "", yes}, ep{"fd00::9%lo", "", yes}, ep{"::1", "", yes}),
		slice("default", "kubernetes-bad-port", "kubernetes", 70000, ep{"198.51.100.12", "", yes}),
		slice("openshift-ingress", "router-a", "router-internal-default", 1936,
			ep{"10.128.0.5", "master-0", yes}, ep{"10.128.0.6", "a b}", yes}),
	)
	var mu sync.Mutex
	var drops []string
	o := kube.NewOptions()
	o.Dropped = func(d kube.Drop) {
		mu.Lock()
		defer mu.Unlock()
		drops = append(drops, fmt.Sprintf("%s %s %q %s", d.Object, d.Field, d.Value, d.Reason))
	}
	ch, _, _ := watch(t, c, o)
	s := await(t, ch, "the initial state", func(s cluster.Snapshot) bool { return len(s.Nodes) == 2 })

	want := cluster.Snapshot{
		Nodes: []cluster.Node{
			{Name: "master-0", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.11")}},
			{Name: "master-2", ControlPlane: true, Addresses: []netip.Addr{netip.MustParseAddr("198.51.100.13")}},
		},
		APIServers:   []netip.AddrPort{netip.MustParseAddrPort("198.51.100.11:6443")},
		IngressNodes: []string{"master-0"},
	}
	if fmt.Sprint(s) != fmt.Sprint(want) {
		t.Errorf("Snapshot =\n  %+v\nwant\n  %+v", s, want)
	}
	if strings.Contains(fmt.Sprint(s), "notify_master") {
		t.Errorf("the injection reached the snapshot: %+v", s)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(drops)
	wantDrops := []string{
		`EndpointSlice default/kubernetes address "::1" not-unicast`,
		`EndpointSlice default/kubernetes address "fd00::9%lo" not-unicast`,
		`EndpointSlice default/kubernetes-bad-port port "70000" port-out-of-range`,
		`EndpointSlice openshift-ingress/router-a nodeName "a b}" invalid-name`,
		`Node master-2 InternalIP "0.0.0.0" not-unicast`,
		`Node master-2 InternalIP "224.0.0.18" not-unicast`,
		`Node master-2 InternalIP "fd00::3%eth0" not-unicast`,
		// netip.ParseAddr takes any text as a zone: it parses, and is refused
		// as a zoned address.
		`Node master-2 InternalIP "fd00::3%eth0}\n notify_master \"/bin/sh -c id\"\n{" not-unicast`,
		`Node master-2 InternalIP "master-2.example.com" not-an-address`,
		`Node name "master-1\nnotify_master" invalid-name`,
	}
	if !slices.Equal(drops, wantDrops) {
		t.Errorf("Dropped =\n  %s\nwant\n  %s", strings.Join(drops, "\n  "), strings.Join(wantDrops, "\n  "))
	}
}
