package kube

import (
	"fmt"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestToClaim(t *testing.T) {
	dual := corev1.IPFamilyPolicyPreferDualStack
	base := func() *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", ResourceVersion: "9",
				Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"}},
			Spec: corev1.ServiceSpec{
				Type:       corev1.ServiceTypeLoadBalancer,
				IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
				Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}},
				Selector:   map[string]string{"app": "web"},
			},
		}
	}
	for _, tc := range []struct {
		name string
		mod  func(*corev1.Service)
		want string
	}{
		{"plain", func(*corev1.Service) {}, "fam=[false] dual=false pool= req=[] key= ports=[{TCP 80}] local=false cur=[] invalid="},
		{"dual stack preferred", func(s *corev1.Service) {
			s.Spec.IPFamilies, s.Spec.IPFamilyPolicy = []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}, &dual
		}, "fam=[true false] dual=true pool= req=[] key= ports=[{TCP 80}] local=false cur=[] invalid="},
		{"spec.loadBalancerIP", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "192.0.2.7" },
			"fam=[false] dual=false pool= req=[192.0.2.7] key= ports=[{TCP 80}] local=false cur=[] invalid="},
		{"our annotations", func(s *corev1.Service) {
			s.Annotations = map[string]string{AnnotationAddresses: "192.0.2.7, 2001:db8::7", AnnotationPool: "public", AnnotationSharing: "dns"}
		}, "fam=[false] dual=false pool=public req=[192.0.2.7 2001:db8::7] key=dns ports=[{TCP 80}] local=false cur=[] invalid="},
		{"MetalLB's annotations", func(s *corev1.Service) {
			s.Annotations = map[string]string{"metallb.universe.tf/loadBalancerIPs": "192.0.2.8", "metallb.io/address-pool": "p", "metallb.universe.tf/allow-shared-ip": "k"}
		}, "fam=[false] dual=false pool=p req=[192.0.2.8] key=k ports=[{TCP 80}] local=false cur=[] invalid="},
		{"the annotation wins over spec.loadBalancerIP", func(s *corev1.Service) {
			s.Spec.LoadBalancerIP = "192.0.2.1"
			s.Annotations = map[string]string{AnnotationAddresses: "192.0.2.2"}
		}, "fam=[false] dual=false pool= req=[192.0.2.2] key= ports=[{TCP 80}] local=false cur=[] invalid="},
		{"a malformed request", func(s *corev1.Service) { s.Annotations = map[string]string{AnnotationAddresses: "192.0.2.7,web"} },
			`fam=[false] dual=false pool= req=[192.0.2.7] key= ports=[{TCP 80}] local=false cur=[] invalid=annotation infradns.io/loadBalancerIPs: "web" is not an address`},
		{"Local, with a status", func(s *corev1.Service) {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.9"}, {Hostname: "lb.example"}, {IP: "::ffff:192.0.2.10"}}
		}, "fam=[false] dual=false pool= req=[] key= ports=[{TCP 80}] local=true cur=[192.0.2.9 192.0.2.10] invalid="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.mod(s)
			c := ToClaim(s)
			got := fmt.Sprintf("fam=%v dual=%v pool=%s req=%v key=%s ports=%v local=%v cur=%v invalid=%s", c.Families, c.PreferDual, c.Pool, c.Requested, c.SharingKey, c.Ports, c.Local, c.Current, c.Invalid)
			if got != tc.want {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
			// The trimmed Service the watch keeps claims the same.
			trimmed, _ := TrimClaimService(s)
			if c2 := ToClaim(trimmed.(*corev1.Service)); !reflect.DeepEqual(c, c2) {
				t.Errorf("trimmed: %+v, want %+v", c2, c)
			}
			if ts := trimmed.(*corev1.Service); ts.Spec.Selector != nil || ts.Annotations["kubectl.kubernetes.io/last-applied-configuration"] != "" {
				t.Errorf("trimmed Service keeps what no claim reads: %+v", ts)
			}
		})
	}
}

func TestOurs(t *testing.T) {
	mine, other := DefaultClass, "metallb.io/metallb"
	for _, tc := range []struct {
		typ       corev1.ServiceType
		class     *string
		isDefault bool
		want      bool
	}{
		{corev1.ServiceTypeLoadBalancer, &mine, false, true},
		{corev1.ServiceTypeLoadBalancer, &other, true, false},
		{corev1.ServiceTypeLoadBalancer, nil, false, false},
		{corev1.ServiceTypeLoadBalancer, nil, true, true},
		{corev1.ServiceTypeClusterIP, &mine, true, false},
		{corev1.ServiceTypeNodePort, nil, true, false},
	} {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: tc.typ, LoadBalancerClass: tc.class}}
		if got := Ours(s, DefaultClass, tc.isDefault); got != tc.want {
			t.Errorf("type %s class %v default %v: %v, want %v", tc.typ, tc.class, tc.isDefault, got, tc.want)
		}
	}
}

func TestStatusPatch(t *testing.T) {
	c := ToClaim(&corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {IP: "2001:db8::1"}}}}})
	for _, tc := range []struct {
		rv   string
		in   int
		want string
	}{
		{"12", 2, `{"metadata":{"resourceVersion":"12"},"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.1","ipMode":"VIP"},{"ip":"2001:db8::1","ipMode":"VIP"}]}}}`},
		{"13", 0, `{"metadata":{"resourceVersion":"13"},"status":{"loadBalancer":{"ingress":[]}}}`},
	} {
		if got := string(StatusPatch(tc.rv, c.Current[:tc.in])); got != tc.want {
			t.Errorf("StatusPatch: %s, want %s", got, tc.want)
		}
	}
}
