//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/test/e2e/lab"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestBGPServices: Services of type LoadBalancer over BGP, from create to
// the client. The routed lab with the FRR ToR and a real, dual-stack
// kube-apiserver; every node runs lbconfig with 'services' and an lbpools
// (one elected writer gives the addresses). It checks:
//   - a Cluster Service (dual stack): its addresses announced by every
//     node (ECMP, IPv4 and IPv6), the client served by several nodes;
//   - a Local Service: announced only by the node with its ready endpoint,
//     the route following the endpoint to another node, and a Local
//     Service without an endpoint announced nowhere;
//   - the faults on the Cluster Service's route as for the VIPs: the
//     speaker killed and a silent link (BFD), a graceful stop (no request
//     failed but the ToR's rehash), a drain label, and the check that
//     gates the Services (kube-proxy's /healthz, a stand-in here) failing;
//   - two Services sharing an address: announced while either has it;
//   - a deleted Service withdrawn everywhere.
func TestBGPServices(t *testing.T) {
	b := startBGPLabWith(t, "frr", -1, true, bgpLabOpts{services: true})
	c := b.kube.Client
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	svcs := c.CoreV1().Services("shop")
	createOn := func(name string, port int32, share string, local, dual bool) {
		t.Helper()
		class := cluster.LoadBalancerClass
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: &class,
				Ports:                 []corev1.ServicePort{{Name: "https", Port: port, TargetPort: intstr.FromInt32(port)}},
				ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyCluster},
		}
		if share != "" {
			s.Annotations = map[string]string{kube.AnnotationSharing: share}
		}
		if local {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		if dual {
			p := corev1.IPFamilyPolicyRequireDualStack
			s.Spec.IPFamilyPolicy = &p
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		}
		if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create Service %s: %v", name, err)
		}
	}
	create := func(name string, local, dual bool) { t.Helper(); createOn(name, bgpRouterPort, "", local, dual) }
	// addrs waits for lbpools to give Service name n addresses.
	addrs := func(name string, n int) []netip.Addr {
		t.Helper()
		var out []netip.Addr
		lab.Eventually(t, 30*time.Second, 10*time.Millisecond, "Service "+name+" has its addresses", func() error {
			s, err := svcs.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			out = nil
			for _, in := range s.Status.LoadBalancer.Ingress {
				out = append(out, netip.MustParseAddr(in.IP))
			}
			if len(out) != n {
				return fmt.Errorf("status %v", s.Status.LoadBalancer.Ingress)
			}
			return nil
		})
		return out
	}
	host := func(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }
	// hops waits until the ToR's next hops for a are exactly want (node
	// indexes) and says how long that took from t0.
	hops := func(what string, a netip.Addr, t0 time.Time, want ...int) time.Duration {
		t.Helper()
		var w []netip.Addr
		for _, i := range want {
			if a.Is4() {
				w = append(w, b.nodes[i].n.IPv4)
			} else {
				w = append(w, b.nodes[i].n.IPv6)
			}
		}
		slices.SortFunc(w, netip.Addr.Compare)
		var got []netip.Addr
		lab.Eventually(t, 3*bgpRouteBound, 5*time.Millisecond, what, func() error {
			hs, err := b.tor.NextHops(host(a))
			if err != nil {
				return err
			}
			got = slices.Clone(hs)
			slices.SortFunc(got, netip.Addr.Compare)
			if !slices.Equal(got, w) {
				return fmt.Errorf("next hops of %s %v, want %v", a, got, w)
			}
			return nil
		})
		return time.Since(t0)
	}
	all := []int{0, 1, 2}

	// A Cluster Service, dual stack: every node announces both addresses.
	t0 := time.Now()
	create("web", false, true)
	web := addrs("web", 2)
	alloc := time.Since(t0)
	web4, web6 := web[0], web[1]
	if web4.Is6() {
		web4, web6 = web6, web4
	}
	d4 := hops("Cluster Service shop/web announced by every node (IPv4)", web4, t0, all...)
	d6 := hops("Cluster Service shop/web announced by every node (IPv6)", web6, t0, all...)
	t.Logf("shop/web (Cluster, dual stack): addresses %v %d ms after the create; three next hops at the ToR after %d ms (IPv4), %d ms (IPv6)",
		web, alloc.Milliseconds(), d4.Milliseconds(), d6.Milliseconds())

	// The client on the Service's address: ECMP over the nodes.
	_ = b.client.Stop(time.Second)
	b.client = b.lab.Client().Start("probe-web", []string{b.fakeapi, "probe", "-url", fmt.Sprintf("https://%s/", netip.AddrPortFrom(web4, bgpRouterPort)), "-interval", "20ms", "-timeout", "500ms"})
	b.waitClient("client served through shop/web's address", time.Now())
	b.watch = host(web4)
	b.checkECMP("FRR ToR, the client on Service shop/web")

	// A Local Service: only the node with its ready endpoint.
	create("db", true, false)
	db := addrs("db", 1)[0]
	if _, err := c.DiscoveryV1().EndpointSlices("shop").Create(ctx, bgpNodeSlice("db", b.nodes[1].n), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t1 := time.Now()
	d := hops("Local Service shop/db announced by the node of its endpoint", db, t1, 1)
	t.Logf("shop/db (Local): %s announced by %s alone %d ms after its endpoint's slice", db, b.nodes[1].n.Name, d.Milliseconds())
	probe := b.lab.Client().Start("probe-db", []string{b.fakeapi, "probe", "-url", fmt.Sprintf("https://%s/", netip.AddrPortFrom(db, bgpRouterPort)), "-interval", "20ms", "-timeout", "500ms"})
	served := func(from time.Time) map[string]int {
		m := map[string]int{}
		for _, r := range parseFakeAPI(probe.Log()) {
			if r.ok && !r.start.Before(from) {
				m[r.detail[strings.LastIndex(r.detail, "_")+1:]]++
			}
		}
		return m
	}
	from := time.Now()
	time.Sleep(time.Second)
	if sp := served(from); len(sp) != 1 || sp[b.nodes[1].n.Name] == 0 {
		t.Errorf("shop/db served by %v in 1 s, want %s alone", sp, b.nodes[1].n.Name)
	}
	// The endpoint moves: so does the route.
	sl, err := c.DiscoveryV1().EndpointSlices("shop").Get(ctx, "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	moved := bgpNodeSlice("db", b.nodes[2].n)
	moved.ResourceVersion = sl.ResourceVersion
	t2 := time.Now()
	if _, err := c.DiscoveryV1().EndpointSlices("shop").Update(ctx, moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	d = hops("Local Service shop/db follows its endpoint", db, t2, 2)
	t.Logf("shop/db: endpoint moved to %s: the ToR's next hop followed %d ms after the slice's update", b.nodes[2].n.Name, d.Milliseconds())
	lab.Eventually(t, 5*time.Second, 50*time.Millisecond, "shop/db served by "+b.nodes[2].n.Name, func() error {
		from := time.Now()
		time.Sleep(300 * time.Millisecond)
		if sp := served(from); len(sp) != 1 || sp[b.nodes[2].n.Name] == 0 {
			return fmt.Errorf("served by %v", sp)
		}
		return nil
	})
	_ = probe.Stop(time.Second)

	// A Local Service with no endpoint: announced nowhere.
	create("idle", true, false)
	idle := addrs("idle", 1)[0]
	time.Sleep(time.Second) // a second for a wrong announcement to show
	if hs, err := b.tor.NextHops(host(idle)); err != nil || len(hs) != 0 {
		t.Errorf("Local Service shop/idle without an endpoint: next hops %v (%v), want none", hs, err)
	}
	// The writer tells each Service's owner who announces it, and the
	// alert's gauge counts the Services nobody may announce (idle).
	lab.Eventually(t, 5*time.Second, 100*time.Millisecond, "Announced/NotAnnounced events and services_unannounced", func() error {
		evs, err := c.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		got := map[string][]string{}
		for _, e := range evs.Items {
			if e.Reason == "Announced" || e.Reason == "NotAnnounced" {
				got[e.InvolvedObject.Name] = append(got[e.InvolvedObject.Name], e.Reason+": "+e.Message)
			}
		}
		has := func(svc, want string) bool {
			return slices.ContainsFunc(got[svc], func(m string) bool { return strings.HasPrefix(m, want) })
		}
		for _, w := range []struct{ svc, want string }{
			{"db", "Announced: Announced over BGP by " + b.nodes[1].n.Name + " (externalTrafficPolicy Local"},
			{"db", "Announced: Announced over BGP by " + b.nodes[2].n.Name + " (externalTrafficPolicy Local"},
			{"idle", "NotAnnounced: Announced by no node"},
		} {
			if !has(w.svc, w.want) {
				return fmt.Errorf("shop/%s: no event %q in %q", w.svc, w.want, got[w.svc])
			}
		}
		var values []string
		for i := range b.nodes {
			values = append(values, b.metric(i, "coredns_lbpools_services_unannounced"))
		}
		if !slices.Contains(values, "1") {
			return fmt.Errorf("coredns_lbpools_services_unannounced on the nodes: %q, want 1 on the writer", values)
		}
		return nil
	})
	for i, want := range []string{"2", "2", "3"} { // web's two; db's on node 2
		if got := b.metric(i, "coredns_lbconfig_services_announced"); got != want {
			t.Errorf("services_announced on %s = %s, want %s", b.nodes[i].n.Name, got, want)
		}
	}

	// Two Services sharing one address (a sharing key, other ports): the
	// route stays while either has it.
	createOn("mail-a", 25, "mail", false, false)
	createOn("mail-b", 587, "mail", false, false)
	mail := addrs("mail-a", 1)[0]
	if got := addrs("mail-b", 1)[0]; got != mail {
		t.Fatalf("shop/mail-b got %s, shop/mail-a %s: want one shared address", got, mail)
	}
	hops("shared address announced by every node", mail, time.Now(), all...)
	if err := svcs.Delete(ctx, "mail-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a second for a wrong withdrawal to show
	if hs, err := b.tor.NextHops(host(mail)); err != nil || len(hs) != 3 {
		t.Errorf("shared address %s after one of its two Services was deleted: next hops %v (%v), want 3", mail, hs, err)
	}
	t4 := time.Now()
	if err := svcs.Delete(ctx, "mail-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d = hops("shared address withdrawn with its last Service", mail, t4)
	t.Logf("shared address %s: kept while one of its two Services had it, withdrawn %d ms after the last was deleted", mail, d.Milliseconds())

	// Faults on shop/web's route, as for the VIPs; haproxy's health gates
	// the API group, not the Services.
	rounds := bgpRounds(t)
	for _, f := range b.faults() {
		if !strings.HasPrefix(f.name, "haproxy") {
			b.run(f, rounds)
		}
	}
	b.run(b.drain(), rounds)
	// kube-proxy's health failing on a node (its stand-in stopped): the
	// node withdraws the Services' routes; the router there still serves,
	// so nothing fails.
	b.run(bgpFault{name: "kube-proxy's /healthz failing", graceful: true, dropBound: bgpBFDBound,
		do: func(i int) {
			if err := b.nodes[i].proxy.Kill(); err != nil {
				t.Fatal(err)
			}
		},
		restore: func(i int) { b.startProxy(i) }}, rounds)

	// Deleted: withdrawn everywhere.
	t3 := time.Now()
	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	d4 = hops("deleted Service shop/web withdrawn (IPv4)", web4, t3)
	d6 = hops("deleted Service shop/web withdrawn (IPv6)", web6, t3)
	t.Logf("shop/web deleted: withdrawn at the ToR after %d ms (IPv4), %d ms (IPv6)", d4.Milliseconds(), d6.Milliseconds())
}

// bgpNodeSlice is an EndpointSlice of Service shop/svc with one ready
// endpoint on node n (the node's router, on bgpRouterPort).
func bgpNodeSlice(svc string, n *lab.Node) *discoveryv1.EndpointSlice {
	ready := true
	port, name := int32(bgpRouterPort), "https"
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: svc + "-1", Namespace: "shop", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{n.IPv4.String()}, NodeName: &n.Name,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
}
