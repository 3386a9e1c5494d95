package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

func TestHolderLease(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	h := kube.HolderLease{Client: kubefake.FromClientset(c), Namespace: "openshift-kni-infra", Duration: 30 * time.Second, Timeout: 5 * time.Second,
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

// TestHolderLeaseStuckAPI: an API server that accepts a request and never
// answers, at each of a renewal's requests in turn. The renewal must fail
// within its Timeout, the read and the write together, and not hold its
// caller (lbconfig's held-VIP loop) any longer.
func TestHolderLeaseStuckAPI(t *testing.T) {
	const timeout = 500 * time.Millisecond
	lease := &coordinationv1.Lease{
		TypeMeta:   metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "ocp4-api-vip-v4", Namespace: "openshift-kni-infra", ResourceVersion: "7"},
	}
	notFound := &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound}
	t.Run("no timeout", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			t.Error("a renewal without a Timeout sent a request")
		}))
		t.Cleanup(srv.Close)
		client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		h := kube.HolderLease{Client: client, Namespace: "openshift-kni-infra", Duration: 30 * time.Second}
		if err := h.Renew(context.Background(), "ocp4-api-vip-v4", "master-0", time.Now()); err == nil {
			t.Error("Renew without a Timeout succeeded; it must refuse to send an unbounded request")
		}
	})
	for _, tc := range []struct {
		name  string
		get   runtime.Object // the answer to the read; nil: the read hangs
		stuck string         // the method that hangs
	}{
		{"read", nil, http.MethodGet},
		{"create", notFound, http.MethodPost},
		{"update", lease, http.MethodPut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			reached := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == tc.stuck {
					close(reached)
					select {
					case <-release:
					case <-r.Context().Done():
					}
					return
				}
				if r.Method != http.MethodGet {
					http.Error(w, "unexpected "+r.Method, http.StatusMethodNotAllowed)
					return
				}
				code := http.StatusOK
				if s, ok := tc.get.(*metav1.Status); ok {
					code = int(s.Code)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				_ = json.NewEncoder(w).Encode(tc.get)
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			client, err := kube.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			h := kube.HolderLease{Client: client, Namespace: "openshift-kni-infra", Duration: 30 * time.Second, Timeout: timeout}
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- h.Renew(context.Background(), "ocp4-api-vip-v4", "master-0", start) }()
			select {
			case err = <-done:
			case <-time.After(timeout + 5*time.Second):
				t.Fatalf("Renew still blocked %v after it started, with a Timeout of %v", time.Since(start).Round(time.Millisecond), timeout)
			}
			took := time.Since(start)
			select {
			case <-reached:
			default:
				t.Fatalf("Renew returned %v without reaching the %s that hangs", err, tc.stuck)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Renew = %v, want the deadline exceeded", err)
			}
			// From the deadline to the error: the client tearing the request
			// down. A second is a hang bound, not a performance target.
			if took < timeout || took > timeout+time.Second {
				t.Errorf("Renew failed after %v, want at its Timeout of %v", took.Round(time.Millisecond), timeout)
			}
			t.Logf("a renewal whose %s hangs failed after %v: %v", tc.stuck, took.Round(time.Millisecond), err)
		})
	}
}
