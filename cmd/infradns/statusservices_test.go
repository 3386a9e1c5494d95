package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func statusService(ns, name string, typ corev1.ServiceType, hostname string, ips ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{Type: typ}}
	if hostname != "" {
		s.Annotations = map[string]string{cluster.AnnotationHostname: hostname}
	}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

// TestServiceRows: `infradns status -services` lists exactly the names
// lbservices answers (cluster.ServiceNames), pending Services without any,
// and a refused hostname with its reason; ClusterIP Services not at all.
func TestServiceRows(t *testing.T) {
	lb := corev1.ServiceTypeLoadBalancer
	list := []corev1.Service{
		statusService("shop", "web", lb, "store", "2001:db8::52", "192.0.2.52"),
		statusService("bank", "db", lb, "", "192.0.2.1"),
		statusService("shop", "cart", lb, "db.bank", "192.0.2.2"),
		statusService("shop", "pending", lb, "soon"),
		statusService("shop", "internal", corev1.ServiceTypeClusterIP, "", "192.0.2.9"),
	}
	rows := serviceRows(list, "lb", "ocp4.example.com.")
	var out bytes.Buffer
	if err := printServices(&out, rows); err != nil {
		t.Fatal(err)
	}
	want := `SERVICE       ADDRESSES                NAMES
bank/db       192.0.2.1                db.bank.lb.ocp4.example.com
shop/cart     192.0.2.2                cart.shop.lb.ocp4.example.com (hostname db.bank: it is a SERVICE.NAMESPACE name)
shop/pending  <pending>                -
shop/web      192.0.2.52,2001:db8::52  web.shop.lb.ocp4.example.com,store.lb.ocp4.example.com
`
	if got := out.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	var empty bytes.Buffer
	if err := printServices(&empty, serviceRows(nil, "lb", "ocp4.example.com.")); err != nil || !strings.HasPrefix(empty.String(), "SERVICE") {
		t.Errorf("no Service: %q, %v; want the header", empty.String(), err)
	}
}

// TestServiceRowsAllocation: with the pools ConfigMap, `status -services`
// says why a Service of infradns' class is pending, which address a pool
// no longer holds, and what each pool has left, as lbpools decides it.
func TestServiceRowsAllocation(t *testing.T) {
	lb := corev1.ServiceTypeLoadBalancer
	class := kube.DefaultClass
	ours := func(s corev1.Service) corev1.Service { s.Spec.LoadBalancerClass = &class; return s }
	list := []corev1.Service{
		ours(statusService("shop", "web", lb, "", "192.0.2.10")),
		ours(statusService("shop", "old", lb, "", "10.0.0.1")),
		ours(statusService("shop", "wants", lb, "")),
		statusService("shop", "metallb", lb, ""),
	}
	list[2].Annotations = map[string]string{kube.AnnotationAddresses: "192.0.2.10"}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "infradns", Name: kube.PoolsConfigMap},
		Data: map[string]string{kube.PoolsKey: "pools:\n- name: default\n  addresses: [192.0.2.10-192.0.2.12, 2001:db8::/126]\n"}}
	alloc, pools, err := allocation(list, cm, false)
	if err != nil {
		t.Fatal(err)
	}
	rows := serviceRows(list, "lb", "ocp4.example.com.")
	annotate(rows, alloc)
	var out bytes.Buffer
	if err := printServices(&out, rows); err != nil {
		t.Fatal(err)
	}
	if err := printPools(&out, pools); err != nil {
		t.Fatal(err)
	}
	want := `SERVICE       ADDRESSES   NAMES
shop/metallb  <pending>   -
shop/old      10.0.0.1    old.shop.lb.ocp4.example.com (no pool holds 10.0.0.1 any more: kept)
shop/wants    <pending>   - (pending: requested 192.0.2.10 is taken by Service shop/web)
shop/web      192.0.2.10  web.shop.lb.ocp4.example.com
POOL     FAMILY  USED  SIZE
default  IPv4    1     3
default  IPv6    0     3
`
	if got := out.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	cm.Data[kube.PoolsKey] = "pools: [{name: x}]"
	if _, _, err := allocation(list, cm, false); err == nil || !strings.Contains(err.Error(), `ConfigMap infradns/lb-pools key pools.yaml:1: pool "x": no addresses`) {
		t.Errorf("a broken ConfigMap: %v", err)
	}
}

// TestServiceRowsAnnounced: with lbPools in BGP mode, `status -services`
// says who announces each Service of ours, as every node's lbconfig
// decides it: every node for Cluster, the nodes of its ready endpoints for
// Local, none without one; other classes and pending Services: "-".
func TestServiceRowsAnnounced(t *testing.T) {
	lb := corev1.ServiceTypeLoadBalancer
	class := kube.DefaultClass
	ours := func(s corev1.Service, local bool) corev1.Service {
		s.Spec.LoadBalancerClass = &class
		if local {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		return s
	}
	list := []corev1.Service{
		ours(statusService("shop", "web", lb, "", "192.0.2.10"), false),
		ours(statusService("shop", "db", lb, "", "192.0.2.11"), true),
		ours(statusService("shop", "idle", lb, "", "192.0.2.12"), true),
		ours(statusService("shop", "wants", lb, ""), false),
		statusService("shop", "metallb", lb, "", "203.0.113.5"),
	}
	ready, notReady := true, false
	node := func(n string) *string { return &n }
	sls := []discoveryv1.EndpointSlice{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-1", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.128.0.1"}, NodeName: node("worker-2"), Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.128.0.2"}, NodeName: node("worker-1"), Conditions: discoveryv1.EndpointConditions{Ready: &ready}},
			{Addresses: []string{"10.128.0.3"}, NodeName: node("worker-3"), Conditions: discoveryv1.EndpointConditions{Ready: &notReady}},
		},
	}}
	rows := serviceRows(list, "lb", "ocp4.example.com.")
	announcers(rows, list, sls, false)
	var out bytes.Buffer
	if err := printServices(&out, rows); err != nil {
		t.Fatal(err)
	}
	want := `SERVICE       ADDRESSES    ANNOUNCED BY                        NAMES
shop/db       192.0.2.11   worker-1,worker-2                   db.shop.lb.ocp4.example.com
shop/idle     192.0.2.12   no node: no ready endpoint (Local)  idle.shop.lb.ocp4.example.com
shop/metallb  203.0.113.5  -                                   metallb.shop.lb.ocp4.example.com
shop/wants    <pending>    -                                   -
shop/web      192.0.2.10   every node                          web.shop.lb.ocp4.example.com
`
	if got := out.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
