package kube_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kube/kubefake"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestMirror: the first list syncs it, each change calls changed, and
// every stored object went through the transform.
func TestMirror(t *testing.T) {
	cs := fake.NewClientset(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web",
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}}})
	var changes atomic.Int32
	m := kube.NewMirror(func() { changes.Add(1) }, kube.TrimClaimService)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx, "test", kubefake.FromClientset(cs).Services(), &corev1.Service{})
	}()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 5 s", what)
			}
		}
	}
	waitFor("synced", m.HasSynced)
	if n := changes.Load(); n < 1 {
		t.Errorf("changed called %d times after the first list, want at least 1", n)
	}
	before := changes.Load()
	if _, err := cs.CoreV1().Services("bank").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "bank", Name: "db"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the new Service stored", func() bool { return len(m.List()) == 2 })
	if changes.Load() <= before {
		t.Error("a create did not call changed")
	}
	obj, ok, err := m.GetByKey("shop/web")
	if err != nil || !ok {
		t.Fatalf("shop/web: %v %v", ok, err)
	}
	if a := obj.(*corev1.Service).Annotations; len(a) != 0 {
		t.Errorf("stored untrimmed: annotations %v", a)
	}
}
