package lbpools

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestAnnouncersUpdate(t *testing.T) {
	addr := []netip.Addr{netip.MustParseAddr("192.0.2.10")}
	web := cluster.LBService{Namespace: "shop", Name: "web", Addrs: addr}
	db := func(nodes ...string) cluster.LBService {
		return cluster.LBService{Namespace: "shop", Name: "db", Addrs: addr, Local: true, Nodes: nodes}
	}
	var many []string
	for i := range 12 {
		many = append(many, fmt.Sprintf("w-%02d", i))
	}
	a := &announcers{}
	for _, step := range []struct {
		what        string
		svcs        []cluster.LBService
		events      []string // "key reason: message"
		unannounced int
	}{
		{"the first view: counted, no event", []cluster.LBService{web, db()}, nil, 1},
		{"nothing changed", []cluster.LBService{web, db()}, nil, 1},
		{"an endpoint becomes ready", []cluster.LBService{web, db("w-1")}, []string{
			"shop/db Announced: Announced over BGP by w-1 (externalTrafficPolicy Local: the nodes with a ready endpoint)"}, 0},
		{"another node", []cluster.LBService{web, db("w-1", "w-2")}, []string{
			"shop/db Announced: Announced over BGP by w-1, w-2 (externalTrafficPolicy Local: the nodes with a ready endpoint)"}, 0},
		{"no ready endpoint left", []cluster.LBService{web, db()}, []string{
			"shop/db NotAnnounced: Announced by no node: externalTrafficPolicy Local and no ready endpoint"}, 1},
		{"deleted: no event", []cluster.LBService{web}, nil, 0},
		{"created: its first announcers", []cluster.LBService{web, db(many...)}, []string{
			"shop/db Announced: Announced over BGP by w-00, w-01, w-02, w-03, w-04, w-05, w-06, w-07, w-08, w-09 and 2 more (externalTrafficPolicy Local: the nodes with a ready endpoint)"}, 0},
		{"Local to Cluster", []cluster.LBService{web, {Namespace: "shop", Name: "db", Addrs: addr}}, []string{
			"shop/db Announced: Announced over BGP by every node"}, 0},
	} {
		evs, n := a.update(step.svcs)
		var got []string
		for _, e := range evs {
			got = append(got, e.key+" "+e.reason+": "+e.message)
		}
		if strings.Join(got, "\n") != strings.Join(step.events, "\n") || n != step.unannounced {
			t.Errorf("%s: events\n%s\nunannounced %d; want\n%s\nunannounced %d", step.what, strings.Join(got, "\n"), n, strings.Join(step.events, "\n"), step.unannounced)
		}
	}
}

// TestAnnounceEvents: the writer with 'announce' tells a Local Service's
// owner when its last ready endpoint goes (a warning, and the gauge the
// alert reads) and when one comes back.
func TestAnnounceEvents(t *testing.T) {
	db := svc("shop/db", ptr(kube.DefaultClass), "192.0.2.15")
	db.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	slice := func(ready bool) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "shop", Name: "db-x", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.5"}, NodeName: ptr("w-1"),
				Conditions: discoveryv1.EndpointConditions{Ready: ptr(ready)}}},
		}
	}
	cs := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "infradns", Name: kube.PoolsConfigMap},
			Data: map[string]string{PoolsKey: "pools:\n- name: default\n  addresses: [192.0.2.10-192.0.2.20]\n"}},
		db, slice(true),
	)
	client := kubefake.FromClientset(cs)
	l := &LBPools{
		class: kube.DefaultClass, poolsNS: "infradns", poolsName: kube.PoolsConfigMap, announce: true,
		leaseNS: "infradns", leaseName: kube.AllocatorLease, leaseDuration: 600 * time.Millisecond,
		identity: "a", retry: 50 * time.Millisecond, debounce: 5 * time.Millisecond,
		newClient: func() (kube.Client, error) { return client, nil },
	}
	l.Start()
	defer l.Stop()
	ctx := context.Background()
	events := func() string {
		evs, err := cs.CoreV1().Events("shop").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var out []string
		for _, e := range evs.Items {
			out = append(out, e.InvolvedObject.Name+" "+e.Type+" "+e.Reason)
		}
		return strings.Join(out, ", ")
	}
	eventually(t, "writing", func() error {
		if !l.leading.Load() {
			return fmt.Errorf("not leading")
		}
		return nil
	})
	// Its first view is silent: the Service's announcers did not change.
	time.Sleep(200 * time.Millisecond)
	if got := events(); got != "" {
		t.Errorf("events after the writer's first view: %q, want none", got)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("shop").Update(ctx, slice(false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NotAnnounced", func() error {
		if got := events(); got != "db Warning NotAnnounced" {
			return fmt.Errorf("events %q", got)
		}
		if v := testutil.ToFloat64(unannounced()); v != 1 {
			return fmt.Errorf("services_unannounced %v", v)
		}
		return nil
	})
	if _, err := cs.DiscoveryV1().EndpointSlices("shop").Update(ctx, slice(true), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Announced", func() error {
		if got := events(); !strings.Contains(got, "db Normal Announced") {
			return fmt.Errorf("events %q", got)
		}
		if v := testutil.ToFloat64(unannounced()); v != 0 {
			return fmt.Errorf("services_unannounced %v", v)
		}
		return nil
	})
}
