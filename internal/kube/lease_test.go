package kube_test

import (
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestHolderLease(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	h := kube.HolderLease{Client: kubefake.FromClientset(c), Namespace: "openshift-kni-infra", Duration: 30 * time.Second,
		Labels: map[string]string{kube.LabelCluster: "ocp4"}, Annotations: map[string]string{kube.AnnotationVIP: "192.0.2.5"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := h.Renew(ctx, "ocp4-api-vip-v4", "master-0", t0); err != nil {
		t.Fatal(err)
	}
	if err := h.Renew(ctx, "ocp4-api-vip-v4", "master-0", t0); err != nil {
		t.Fatal(err)
	}
	l, err := c.CoordinationV1().Leases("openshift-kni-infra").Get(ctx, "ocp4-api-vip-v4", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "master-0" || !l.Spec.AcquireTime.Time.Equal(t0) || *l.Spec.LeaseDurationSeconds != 30 ||
		(l.Spec.LeaseTransitions != nil && *l.Spec.LeaseTransitions != 0) {
		t.Errorf("Lease = %+v", l.Spec)
	}
	if l.Labels[kube.LabelManagedBy] != kube.ManagedByLBConfig || l.Labels[kube.LabelCluster] != "ocp4" ||
		l.Annotations[kube.AnnotationVIP] != "192.0.2.5" || l.Annotations[kube.AnnotationTransition] != "2026-01-01T00:00:00Z" {
		t.Errorf("Lease labels %v annotations %v", l.Labels, l.Annotations)
	}
	// Failover: another node takes the VIP and the lease.
	t1 := t0.Add(time.Minute)
	if err := h.Renew(ctx, "ocp4-api-vip-v4", "master-1", t1); err != nil {
		t.Fatal(err)
	}
	l, _ = c.CoordinationV1().Leases("openshift-kni-infra").Get(ctx, "ocp4-api-vip-v4", metav1.GetOptions{})
	if *l.Spec.HolderIdentity != "master-1" || !l.Spec.AcquireTime.Time.Equal(t1) || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 {
		t.Errorf("Lease after failover = %+v", l.Spec)
	}
	if got := l.Annotations[kube.AnnotationTransition]; got != "2026-01-01T00:01:00Z" {
		t.Errorf("transition time after failover %q", got)
	}
	if l.Labels[kube.LabelCluster] != "ocp4" {
		t.Errorf("labels after failover %v", l.Labels)
	}
}
