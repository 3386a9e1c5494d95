package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkServiceUpdateUnread is what a Service update that changes
// nothing a name reads costs the watch once decoded (another tool's
// annotation, a ClusterIP Service's change): the trim, ToService and a
// comparison, no call of the handler. Such updates are the common case.
func BenchmarkServiceUpdateUnread(b *testing.B) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web",
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 2000)}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}, {Name: "https", Port: 443}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {IP: "2001:db8::1"}}}},
	}
	calls := 0
	store := newServiceStore(func() { calls++ }, func(Drop) {})
	trimmed, _ := transformService(svc)
	if err := store.Update(trimmed); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		trimmed, _ := transformService(svc)
		_ = store.Update(trimmed)
	}
	if calls != 1 {
		b.Fatalf("%d calls for one change", calls)
	}
}
