package kube

import (
	"context"
	"fmt"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HolderLease records in a Lease which node holds a VIP and since when, so
// `kubectl get lease -n NAMESPACE` answers "who holds the API VIP". Only the
// holder writes it; a node that takes the VIP over overwrites it, and when
// the holder dies its renewals stop and the lease visibly expires.
type HolderLease struct {
	Client    Client
	Namespace string
	// Duration is the lease duration written; renew well inside it.
	Duration time.Duration
	// Timeout bounds one Renew, its read and its write together. Without
	// one, an API server (or a proxy, or a half-open connection) that
	// accepts a request and never answers holds the caller forever: the
	// client has no timeout of its own, since one on the client would cut
	// its watches too.
	Timeout time.Duration
	// Labels and Annotations are added to the Lease's own (LeaseLabels,
	// AnnotationVIP): what `infradns status` selects and prints.
	Labels, Annotations map[string]string
}

// What a status Lease carries besides its spec. The labels select a
// cluster's Leases (`kubectl get lease -l infradns.io/cluster=ocp4`); the
// annotations say which address the Lease is about and since when its holder
// has held it (the spec's acquireTime, readable without -o yaml).
const (
	LabelManagedBy       = "app.kubernetes.io/managed-by"
	ManagedByLBConfig    = "infradns-lbconfig"
	LabelCluster         = "infradns.io/cluster"
	LabelGroup           = "infradns.io/vip-group"
	LabelFamily          = "infradns.io/family"
	AnnotationVIP        = "infradns.io/vip"
	AnnotationTransition = "infradns.io/transition-time"
)

// Renew writes that identity holds the lease name since the given time.
func (h HolderLease) Renew(ctx context.Context, name, identity string, since time.Time) error {
	if h.Timeout <= 0 {
		return fmt.Errorf("lease %s/%s: no renewal timeout", h.Namespace, name)
	}
	ctx, cancel := context.WithTimeout(ctx, h.Timeout)
	defer cancel()
	leases := h.Client.Leases(h.Namespace)
	now := metav1.NewMicroTime(time.Now())
	acquired := metav1.NewMicroTime(since)
	secs := int32(h.Duration / time.Second)
	spec := coordinationv1.LeaseSpec{
		HolderIdentity:       &identity,
		LeaseDurationSeconds: &secs,
		AcquireTime:          &acquired,
		RenewTime:            &now,
	}
	labels := map[string]string{LabelManagedBy: ManagedByLBConfig}
	maps.Copy(labels, h.Labels)
	annotations := map[string]string{AnnotationTransition: since.UTC().Format(time.RFC3339Nano)}
	maps.Copy(annotations, h.Annotations)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.Namespace, Labels: labels, Annotations: annotations},
			Spec:       spec,
		}, metav1.CreateOptions{})
	case err == nil:
		if l.Labels == nil {
			l.Labels = map[string]string{}
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		maps.Copy(l.Labels, labels)
		maps.Copy(l.Annotations, annotations)
		spec.LeaseTransitions = l.Spec.LeaseTransitions
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != identity {
			t := int32(1)
			if l.Spec.LeaseTransitions != nil {
				t = *l.Spec.LeaseTransitions + 1
			}
			spec.LeaseTransitions = &t
		}
		l.Spec = spec
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("lease %s/%s: %w", h.Namespace, name, err)
	}
	return nil
}
