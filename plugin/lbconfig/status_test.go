package lbconfig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path"
	"runtime"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"
	"github.com/infradns/infradns/internal/lb/netnstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// TestVIPStatusLease puts the API VIP on eth0 of a namespace made for the
// test, as keepalived does on the holder, and checks the status loop
// (running inside that namespace) records this node as holder in a Lease.
func TestVIPStatusLease(t *testing.T) {
	ns := netnstest.New(t, "st")
	netnstest.Run(t, "-n", ns, "addr", "add", "192.0.2.5/32", "dev", "eth0")
	m, err := cluster.New(cluster.Spec{Name: "ocp4", Node: "master-0", Interface: "eth0",
		APIVIPs:     []netip.Addr{netip.MustParseAddr("192.0.2.5")},
		IngressVIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}})
	if err != nil {
		t.Fatal(err)
	}
	st := &vipStatus{model: m, namespace: "openshift-kni-infra"}
	cs := fake.NewClientset()
	client := kubefake.FromClientset(cs)
	st.client.Store(&client)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netnstest.Enter(ns); err != nil {
			done <- err
			return
		}
		st.run(ctx)
		done <- nil
	}()
	deadline := time.Now().Add(10 * time.Second)
	var holder string
	for time.Now().Before(deadline) {
		l, err := cs.CoordinationV1().Leases("openshift-kni-infra").Get(ctx, "ocp4-api-vip-v4", metav1.GetOptions{})
		if err == nil && l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if holder != "master-0" {
		t.Errorf("API VIP lease holder = %q, want master-0", holder)
	}
	if _, err := cs.CoordinationV1().Leases("openshift-kni-infra").Get(context.Background(), "ocp4-ingress-vip-v4", metav1.GetOptions{}); err == nil {
		t.Error("Lease written for the ingress VIP this node does not hold")
	}
}

// TestVIPStatusStuckAPI runs the status loop against an API server that
// accepts every request and never answers, with both VIPs held: each
// renewal gives up after leaseTimeout and the loop goes on to the next VIP
// and, a tick later, tries the first again. Before renewals had a bound,
// the first request held the loop (and vip_held) until the process ended.
func TestVIPStatusStuckAPI(t *testing.T) {
	ns := netnstest.New(t, "sk")
	netnstest.Run(t, "-n", ns, "addr", "add", "192.0.2.5/32", "dev", "eth0")
	netnstest.Run(t, "-n", ns, "addr", "add", "192.0.2.10/32", "dev", "eth0")
	m, err := cluster.New(cluster.Spec{Name: "ocp4", Node: "master-0", Interface: "eth0",
		APIVIPs:     []netip.Addr{netip.MustParseAddr("192.0.2.5")},
		IngressVIPs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}})
	if err != nil {
		t.Fatal(err)
	}
	type request struct {
		lease string
		at    time.Time
	}
	requests := make(chan request, 100)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		requests <- request{lease: path.Base(r.URL.Path), at: time.Now()}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	st := &vipStatus{model: m, namespace: "openshift-kni-infra"}
	st.client.Store(&client)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := netnstest.Enter(ns); err != nil {
			done <- err
			return
		}
		st.run(ctx)
		done <- nil
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}()

	// The bounds are hang bounds: the loop's tick (1 s) and leaseTimeout
	// with a second to spare.
	next := func(what string, within time.Duration) request {
		t.Helper()
		select {
		case r := <-requests:
			return r
		case <-time.After(within):
			t.Fatalf("no request for %s within %v: the status loop is stuck", what, within)
		}
		return request{}
	}
	first := next("the API VIP's lease", 3*time.Second)
	second := next("the ingress VIP's lease after the API's hung", leaseTimeout+time.Second)
	third := next("the API VIP's lease again", leaseTimeout+2*time.Second)
	if first.lease != "ocp4-api-vip-v4" || second.lease != "ocp4-ingress-vip-v4" || third.lease != "ocp4-api-vip-v4" {
		t.Errorf("requests for %s, %s, %s; want the API VIP's lease, the ingress VIP's, the API VIP's again", first.lease, second.lease, third.lease)
	}
	// Times are the server's: it sees the hung request some time after
	// the client's deadline began (the request's trip, longer on a loaded
	// machine; 3 ms seen), so the gap may fall short of leaseTimeout by
	// that much. A loop that moved on without waiting for the timeout
	// would show a gap near 0.
	const transit = 100 * time.Millisecond
	if gap := second.at.Sub(first.at); gap < leaseTimeout-transit {
		t.Errorf("the ingress VIP's renewal began %v after the API VIP's hung, want after its leaseTimeout %v", gap, leaseTimeout)
	}
	t.Logf("a hung renewal gave up and the loop went on after %v; the API VIP's lease was tried again %v after its first try",
		second.at.Sub(first.at).Round(time.Millisecond), third.at.Sub(first.at).Round(time.Millisecond))
}
