package kube_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
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

// ourService is a Service of class infradns.io/lb with addresses, Local
// when local.
func ourService(ns, name string, local bool, ips ...string) *corev1.Service {
	s := lbService(ns, name, ips...)
	class := cluster.LoadBalancerClass
	s.Spec.LoadBalancerClass = &class
	s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if local {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	return s
}

// nodeSlice is an EndpointSlice of Service ns/svc with one endpoint per
// node; a node written "name!" has a not-ready endpoint.
func nodeSlice(ns, name, svc string, nodes ...string) *discoveryv1.EndpointSlice {
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for i, n := range nodes {
		ready := !strings.HasSuffix(n, "!")
		node := strings.TrimSuffix(n, "!")
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.128.0.%d", i+1)},
			NodeName: &node, Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	return sl
}

func lbKeys(svcs []cluster.LBService) string {
	var out []string
	for _, s := range svcs {
		w := fmt.Sprintf("%s=%v", s.Key(), s.Addrs)
		if s.Local {
			w += fmt.Sprintf(" local%v", s.Nodes)
		}
		out = append(out, w)
	}
	return fmt.Sprint(out)
}

func TestLBServices(t *testing.T) {
	noClass := lbService("shop", "legacy", "192.0.2.9")
	other := ourService("shop", "metallb", false, "192.0.2.8")
	otherClass := "metallb.io/metallb"
	other.Spec.LoadBalancerClass = &otherClass
	svcs := []any{
		ourService("shop", "web", false, "192.0.2.1", "2001:db8::1"),
		ourService("shop", "db", true, "192.0.2.2"),
		ourService("shop", "pending", false),
		ourService("bank", "api", true, "192.0.2.3"),
		noClass, other,
	}
	slices := []any{
		nodeSlice("shop", "db-a", "db", "worker-1", "worker-2!"),
		nodeSlice("shop", "db-b", "db", "worker-3", "worker-1"),
		nodeSlice("shop", "web-a", "web", "worker-9"),
		nodeSlice("bank", "db-x", "db", "worker-7"), // another namespace's db
	}
	for _, tc := range []struct {
		name      string
		isDefault bool
		want      string
	}{
		{"our class", false, "[bank/api=[192.0.2.3] local[] shop/db=[192.0.2.2] local[worker-1 worker-3] shop/web=[192.0.2.1 2001:db8::1]]"},
		{"and no class", true, "[bank/api=[192.0.2.3] local[] shop/db=[192.0.2.2] local[worker-1 worker-3] shop/legacy=[192.0.2.9] shop/web=[192.0.2.1 2001:db8::1]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lbKeys(kube.LBServices(svcs, slices, cluster.LoadBalancerClass, tc.isDefault, func(kube.Drop) {})); got != tc.want {
				t.Errorf("LBServices\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestAnnounceWatcher: the first call comes once Services and slices are
// both listed; a Local Service's endpoint moving is handed on, a change
// nothing reads is not.
func TestAnnounceWatcher(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(ourService("shop", "web", false, "192.0.2.1"), ourService("shop", "db", true, "192.0.2.2"),
		nodeSlice("shop", "db-a", "db", "worker-1"))
	w := kube.NewAnnounceWatcher(kubefake.FromClientset(c), kube.AnnounceOptions{Class: cluster.LoadBalancerClass, Debounce: 20 * time.Millisecond})
	lists := make(chan []cluster.LBService, 100)
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(runCtx, func(s []cluster.LBService) { lists <- s }) })
	defer func() { cancel(); wg.Wait() }()
	next := func(what string) string {
		t.Helper()
		select {
		case l := <-lists:
			return lbKeys(l)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no list within 5 s", what)
			return ""
		}
	}
	if got := next("first"); got != "[shop/db=[192.0.2.2] local[worker-1] shop/web=[192.0.2.1]]" {
		t.Fatalf("first list %s", got)
	}
	if !w.HasSynced() {
		t.Error("HasSynced false after the first list")
	}
	// An endpoint's address changes on the same node: nothing to hand on.
	sl, err := c.DiscoveryV1().EndpointSlices("shop").Get(ctx, "db-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sl.Endpoints[0].Addresses = []string{"10.128.9.9"}
	if _, err := c.DiscoveryV1().EndpointSlices("shop").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The endpoint moves to worker-2: handed on.
	node := "worker-2"
	sl.Endpoints[0].NodeName = &node
	if _, err := c.DiscoveryV1().EndpointSlices("shop").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next("endpoint moved"); got != "[shop/db=[192.0.2.2] local[worker-2] shop/web=[192.0.2.1]]" {
		t.Fatalf("after the endpoint moved (and a change nothing reads before it) %s", got)
	}
	if err := c.CoreV1().Services("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := next("deleted"); got != "[shop/db=[192.0.2.2] local[worker-2]]" {
		t.Fatalf("after the delete %s", got)
	}
	select {
	case l := <-lists:
		t.Errorf("a list nobody changed: %s", lbKeys(l))
	case <-time.After(100 * time.Millisecond):
	}
}

// BenchmarkLBServices is what one debounced change costs a node that
// announces Services: the whole list rebuilt from the trimmed stores, at
// 1,000 Services of ours (half of them Local, three ready endpoints each
// on 5,000 nodes) among 10,000 Services and their slices. No Node is
// watched: a Node's heartbeat costs nothing here.
func BenchmarkLBServices(b *testing.B) {
	var svcs, sls []any
	for i := range 10000 {
		ns, name := fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("svc-%d", i)
		var s *corev1.Service
		if i%10 == 0 {
			s = ourService(ns, name, i%20 == 0, fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		} else {
			s = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
		}
		t, _ := kube.TrimClaimService(s)
		svcs = append(svcs, t)
		sls = append(sls, nodeSlice(ns, name+"-a", name, fmt.Sprintf("node-%d", i%5000), fmt.Sprintf("node-%d", (i+1)%5000), fmt.Sprintf("node-%d!", (i+2)%5000)))
	}
	b.ReportAllocs()
	for b.Loop() {
		if out := kube.LBServices(svcs, sls, cluster.LoadBalancerClass, false, func(kube.Drop) {}); len(out) != 1000 {
			b.Fatalf("%d Services, want 1000", len(out))
		}
	}
}
