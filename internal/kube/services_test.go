package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func lbService(ns, name string, ips ...string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer},
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func TestToService(t *testing.T) {
	withHostname := func(s *corev1.Service, h string) *corev1.Service {
		s.Annotations = map[string]string{cluster.AnnotationHostname: h, "other": "x"}
		return s
	}
	clusterIP := lbService("shop", "web", "192.0.2.1")
	clusterIP.Spec.Type = corev1.ServiceTypeClusterIP
	cloud := lbService("shop", "web")
	cloud.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{Hostname: "abc.elb.example.com"}}
	cases := []struct {
		name  string
		in    *corev1.Service
		ok    bool
		want  cluster.Service
		drops []string // Reason of each drop
	}{
		{name: "one address", in: lbService("shop", "web", "192.0.2.1"), ok: true,
			want: cluster.Service{Namespace: "shop", Name: "web", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}},
		{name: "dual stack, sorted, each once, mapped IPv4 unmapped", in: lbService("shop", "web", "2001:db8::1", "::ffff:192.0.2.1", "192.0.2.1"), ok: true,
			want: cluster.Service{Namespace: "shop", Name: "web", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}}},
		{name: "hostname annotation, lower-cased", in: withHostname(lbService("shop", "web", "192.0.2.1"), "Store.EU"), ok: true,
			want: cluster.Service{Namespace: "shop", Name: "web", Hostname: "store.eu", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}}},
		{name: "bad hostname annotation dropped, the Service kept", in: withHostname(lbService("shop", "web", "192.0.2.1"), "a..b"), ok: true,
			want:  cluster.Service{Namespace: "shop", Name: "web", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
			drops: []string{kube.ReasonHostname}},
		{name: "hostname with a trailing dot dropped", in: withHostname(lbService("shop", "web", "192.0.2.1"), "store."), ok: true,
			want:  cluster.Service{Namespace: "shop", Name: "web", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
			drops: []string{kube.ReasonHostname}},
		{name: "not an address and not unicast dropped", in: lbService("shop", "web", "x", "224.0.0.1", "192.0.2.1"), ok: true,
			want:  cluster.Service{Namespace: "shop", Name: "web", Addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
			drops: []string{kube.ReasonAddress, kube.ReasonUnicast}},
		{name: "no address yet (pending)", in: lbService("shop", "web")},
		{name: "only a cloud hostname", in: cloud},
		{name: "not of type LoadBalancer", in: clusterIP},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var drops []string
			got, ok := kube.ToService(c.in, func(d kube.Drop) { drops = append(drops, d.Reason) })
			if ok != c.ok || !slices.Equal(drops, c.drops) {
				t.Fatalf("ok %v, drops %v; want %v, %v", ok, drops, c.ok, c.drops)
			}
			if ok && (got.Key() != c.want.Key() || got.Hostname != c.want.Hostname || !slices.Equal(got.Addrs, c.want.Addrs)) {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// serviceLists runs a ServiceWatcher on c and returns what it hands on.
func serviceLists(t *testing.T, c *fake.Clientset) (<-chan []cluster.Service, *kube.ServiceWatcher) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := kube.NewServiceWatcher(kubefake.FromClientset(c), kube.ServiceOptions{Debounce: 20 * time.Millisecond})
	out := make(chan []cluster.Service, 100)
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx, func(s []cluster.Service) { out <- s }) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return out, w
}

func keys(svcs []cluster.Service) string {
	var out []string
	for _, s := range svcs {
		out = append(out, fmt.Sprintf("%s=%v", s.Key(), s.Addrs))
	}
	return fmt.Sprint(out)
}

// nextList waits for the next list handed on, failing after 5 s.
func nextList(t *testing.T, lists <-chan []cluster.Service) []cluster.Service {
	t.Helper()
	select {
	case l := <-lists:
		return l
	case <-time.After(5 * time.Second):
		t.Fatal("no Service list within 5 s")
		return nil
	}
}

func TestServiceWatcher(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(lbService("shop", "web", "192.0.2.2"), lbService("bank", "db", "192.0.2.1"),
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}})
	lists, w := serviceLists(t, c)
	if got := keys(nextList(t, lists)); got != "[bank/db=[192.0.2.1] shop/web=[192.0.2.2]]" {
		t.Fatalf("first list %s", got)
	}
	if !w.HasSynced() {
		t.Error("HasSynced false after the first list")
	}

	// A change nothing reads (a label, another annotation): no list.
	web, err := c.CoreV1().Services("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	web.Labels = map[string]string{"tier": "front"}
	if _, err := c.CoreV1().Services("shop").Update(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A ClusterIP Service coming and going: no list either.
	other := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "internal"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	if _, err := c.CoreV1().Services("shop").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Then an address change, which is handed on.
	web.Status.LoadBalancer.Ingress = append(web.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: "2001:db8::2"})
	if _, err := c.CoreV1().Services("shop").UpdateStatus(ctx, web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := keys(nextList(t, lists)); got != "[bank/db=[192.0.2.1] shop/web=[192.0.2.2 2001:db8::2]]" {
		t.Fatalf("after the address change (and two changes nothing reads before it) %s", got)
	}

	// Type changed away from LoadBalancer: the Service has no name.
	db, err := c.CoreV1().Services("bank").Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db.Spec.Type = corev1.ServiceTypeNodePort
	if _, err := c.CoreV1().Services("bank").Update(ctx, db, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := keys(nextList(t, lists)); got != "[shop/web=[192.0.2.2 2001:db8::2]]" {
		t.Fatalf("after the type change %s", got)
	}
	if err := c.CoreV1().Services("shop").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := keys(nextList(t, lists)); got != "[]" {
		t.Fatalf("after the delete %s", got)
	}
	select {
	case l := <-lists:
		t.Errorf("a list nobody changed: %s", keys(l))
	case <-time.After(100 * time.Millisecond):
	}
}
