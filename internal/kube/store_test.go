package kube

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNotifyStore(t *testing.T) {
	changes := 0
	s := newNotifyStore(trimNode, func() { changes++ })
	node := func(name string) *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"a": "b"}},
			Status: corev1.NodeStatus{
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.11"}},
				Images:    []corev1.ContainerImage{{Names: []string{"big"}}},
			},
		}
	}
	if s.HasSynced() {
		t.Fatal("synced before the first listing")
	}
	steps := []struct {
		name string
		do   func() error
		keys []string
	}{
		{"listing", func() error { return s.Replace([]any{node("m0"), node("m1")}, "1") }, []string{"m0", "m1"}},
		{"add", func() error { return s.Add(node("w0")) }, []string{"m0", "m1", "w0"}},
		{"update", func() error { return s.Update(node("w0")) }, []string{"m0", "m1", "w0"}},
		{"delete", func() error { return s.Delete(node("m1")) }, []string{"m0", "w0"}},
		{"relisting drops what is gone", func() error { return s.Replace([]any{node("m0")}, "2") }, []string{"m0"}},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if changes != i+1 {
			t.Errorf("%s: %d change notifications, want %d", st.name, changes, i+1)
		}
		keys := s.ListKeys()
		if len(keys) != len(st.keys) {
			t.Errorf("%s: keys %v, want %v", st.name, keys, st.keys)
		}
		for _, k := range st.keys {
			obj, ok, _ := s.GetByKey(k)
			if !ok {
				t.Errorf("%s: %s missing", st.name, k)
				continue
			}
			if n := obj.(*corev1.Node); len(n.Status.Images) != 0 || len(n.Status.Addresses) != 1 {
				t.Errorf("%s: %s not trimmed: %+v", st.name, k, n.Status)
			}
		}
	}
	if !s.HasSynced() {
		t.Error("not synced after a listing")
	}
}

// The reconnect delay after a long outage stays near its cap: the point of
// owning the reflectors.
func TestReconnectBackoffCapped(t *testing.T) {
	b := reconnectBackoff
	var worst time.Duration
	for range 100 {
		worst = max(worst, b.Step())
	}
	if limit := time.Duration(float64(b.Cap) * (1 + b.Jitter)); worst > limit || worst < b.Cap {
		t.Errorf("longest delay %v after 100 failures, want within [%v, %v]", worst, b.Cap, limit)
	}
}
