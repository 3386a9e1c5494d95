package lbpools

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lbpool"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// svc builds a Service "ns/name" of type LoadBalancer, class ours (nil for
// none), with its status IPs.
func svc(key string, class *string, status ...string) *corev1.Service {
	ns, name, _ := strings.Cut(key, "/")
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "7"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class,
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports:      []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	for _, ip := range status {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func ptr[T any](v T) *T { return &v }

func TestPlan(t *testing.T) {
	cfg, err := lbpool.Parse([]byte("pools:\n- name: default\n  addresses: [192.0.2.10-192.0.2.12]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ours, metallb := ptr(kube.DefaultClass), ptr("metallb.io/metallb")
	clusterIP := func(s *corev1.Service) *corev1.Service { s.Spec.Type = corev1.ServiceTypeClusterIP; return s }
	withHostname := func(s *corev1.Service) *corev1.Service {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{Hostname: "x.example"})
		return s
	}
	for _, tc := range []struct {
		name      string
		isDefault bool
		svcs      []*corev1.Service
		writes    string // "ns/name=ADDRS" joined by spaces
		used      int
	}{
		{"ours gets an address", false, []*corev1.Service{svc("a/web", ours)}, "a/web=192.0.2.10", 1},
		{"no class, not the default: left alone", false, []*corev1.Service{svc("a/web", nil)}, "", 0},
		{"no class, the default", true, []*corev1.Service{svc("a/web", nil)}, "a/web=192.0.2.10", 1},
		{"another class: never touched, its address never given", true, []*corev1.Service{svc("a/web", metallb, "192.0.2.10"), svc("a/b", ours)}, "a/b=192.0.2.11", 1},
		{"settled: nothing to write", false, []*corev1.Service{svc("a/web", ours, "192.0.2.11")}, "", 1},
		{"a stray hostname entry is rewritten away", false, []*corev1.Service{withHostname(svc("a/web", ours, "192.0.2.11"))}, "a/web=192.0.2.11", 1},
		{"ClusterIP now: pool addresses cleared", false, []*corev1.Service{clusterIP(svc("a/web", ours, "192.0.2.11"))}, "a/web=", 0},
		{"ClusterIP with another's address: left", false, []*corev1.Service{clusterIP(svc("a/web", nil, "10.9.9.9"))}, "", 0},
		{"ClusterIP without addresses: nothing", false, []*corev1.Service{clusterIP(svc("a/web", ours))}, "", 0},
		{"shared address counted once", false, []*corev1.Service{
			sharing(svc("a/x", ours, "192.0.2.12"), "k", 53), sharing(svc("a/y", ours), "k", 54)}, "a/y=192.0.2.12", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := plan(cfg, tc.svcs, kube.DefaultClass, tc.isDefault)
			var got []string
			for _, w := range o.writes {
				got = append(got, w.svc.Namespace+"/"+w.svc.Name+"="+addrs(w.addrs))
			}
			if g := strings.Join(got, " "); g != tc.writes {
				t.Errorf("writes %q, want %q", g, tc.writes)
			}
			if u := o.usages[0]; u.Pool != "default" || u.Family != "IPv4" || u.Used != tc.used {
				t.Errorf("usage %+v, want default IPv4 used %d", u, tc.used)
			}
		})
	}
}

func sharing(s *corev1.Service, key string, port int32) *corev1.Service {
	s.Annotations = map[string]string{kube.AnnotationSharing: key}
	s.Spec.Ports = []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: port}}
	return s
}

func addrs(as []netip.Addr) string {
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return strings.Join(s, ",")
}

// TestPlanWithWritten: a pass that runs before the watch returns this
// instance's last write sees that write, so the address is not given to
// a second Service (which sorts first and would otherwise take it).
func TestPlanWithWritten(t *testing.T) {
	cfg, err := lbpool.Parse([]byte("pools:\n- name: default\n  addresses: [192.0.2.10-192.0.2.12]\n"))
	if err != nil {
		t.Fatal(err)
	}
	ours := ptr(kube.DefaultClass)
	x := svc("b/x", ours) // the watch has not brought its status yet
	y := svc("a/y", ours) // created since
	w := map[string]written{"b/x": {rv: "7", addrs: []netip.Addr{netip.MustParseAddr("192.0.2.10")}}, "gone/z": {rv: "3"}}
	o := plan(cfg, withWritten([]*corev1.Service{x, y}, w), kube.DefaultClass, false)
	var got []string
	for _, wr := range o.writes {
		got = append(got, wr.svc.Namespace+"/"+wr.svc.Name+"="+addrs(wr.addrs))
	}
	if g := strings.Join(got, " "); g != "a/y=192.0.2.11" {
		t.Errorf("writes %q, want only a/y=192.0.2.11", g)
	}
	if len(x.Status.LoadBalancer.Ingress) != 0 {
		t.Error("the watch's object was modified")
	}
	if _, ok := w["gone/z"]; ok || len(w) != 1 {
		t.Errorf("written %v: want only b/x left (gone/z's Service is gone)", w)
	}
	// The watch caught up (a new resourceVersion): the entry goes.
	x2 := svc("b/x", ours, "192.0.2.10")
	x2.ResourceVersion = "8"
	withWritten([]*corev1.Service{x2, y}, w)
	if len(w) != 0 {
		t.Errorf("written %v after the watch caught up: want none", w)
	}
}
