package lbconfig

import (
	"context"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube/kubefake"
	"github.com/infradns/infradns/internal/lb/netnstest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
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
