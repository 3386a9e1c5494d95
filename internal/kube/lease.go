package kube

import (
	"context"
	"fmt"
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
}

// Renew writes that identity holds the lease name since the given time.
func (h HolderLease) Renew(ctx context.Context, name, identity string, since time.Time) error {
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
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: h.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "infradns-lbconfig"}},
			Spec: spec,
		}, metav1.CreateOptions{})
	case err == nil:
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
