package kube

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestNotifyStore(t *testing.T) {
	changes := 0
	s := newNotifyStore(func() { changes++ })
	sl := func(name string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	}
	if s.HasSynced() {
		t.Fatal("synced before the first listing")
	}
	steps := []struct {
		name string
		do   func() error
		keys []string
	}{
		{"listing", func() error { return s.Replace([]any{sl("a"), sl("b")}, "1") }, []string{"default/a", "default/b"}},
		{"add", func() error { return s.Add(sl("c")) }, []string{"default/a", "default/b", "default/c"}},
		{"update", func() error { return s.Update(sl("c")) }, []string{"default/a", "default/b", "default/c"}},
		{"delete", func() error { return s.Delete(sl("b")) }, []string{"default/a", "default/c"}},
		{"relisting drops what is gone", func() error { return s.Replace([]any{sl("a")}, "2") }, []string{"default/a"}},
	}
	for i, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if changes != i+1 {
			t.Errorf("%s: %d change notifications, want %d", st.name, changes, i+1)
		}
		keys := s.ListKeys()
		slices.Sort(keys)
		if !slices.Equal(keys, st.keys) {
			t.Errorf("%s: keys %v, want %v", st.name, keys, st.keys)
		}
	}
	if !s.HasSynced() {
		t.Error("not synced after a listing")
	}
}

func storeNode(name, ip string, cp bool, heartbeat int64) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Unix(heartbeat, 0))}},
			Images:     []corev1.ContainerImage{{Names: []string{"quay.io/example/big@sha256:0123"}, SizeBytes: 1 << 30}},
		},
	}
	if cp {
		n.Labels["node-role.kubernetes.io/control-plane"] = ""
	}
	return n
}

// TestNodeStore checks which Node events ask for a render: only those that
// change a name, an InternalIP or the control-plane role.
func TestNodeStore(t *testing.T) {
	changes := 0
	var drops []Drop
	s := newNodeStore(func() { changes++ }, func(d Drop) { drops = append(drops, d) })
	steps := []struct {
		name   string
		do     func() error
		render bool
		nodes  []string // name=address[+cp]
	}{
		{"first listing", func() error { return s.Replace([]any{storeNode("m0", "198.51.100.1", true, 1)}, "1") }, true, []string{"m0=198.51.100.1+cp"}},
		{"heartbeat", func() error { return s.Update(storeNode("m0", "198.51.100.1", true, 2)) }, false, []string{"m0=198.51.100.1+cp"}},
		{"add", func() error { return s.Add(storeNode("w0", "198.51.100.2", false, 1)) }, true, []string{"m0=198.51.100.1+cp", "w0=198.51.100.2"}},
		{"address change", func() error { return s.Update(storeNode("w0", "198.51.100.3", false, 2)) }, true, []string{"m0=198.51.100.1+cp", "w0=198.51.100.3"}},
		{"role change", func() error { return s.Update(storeNode("w0", "198.51.100.3", true, 3)) }, true, []string{"m0=198.51.100.1+cp", "w0=198.51.100.3+cp"}},
		{"bad address dropped", func() error { return s.Update(storeNode("w0", "fe80::1%eth0\nx", true, 4)) }, true, []string{"m0=198.51.100.1+cp", "w0=+cp"}},
		{"bad name never stored", func() error { return s.Add(storeNode("Bad_Name", "198.51.100.9", false, 1)) }, false, []string{"m0=198.51.100.1+cp", "w0=+cp"}},
		{"relisting the same", func() error {
			return s.Replace([]any{storeNode("m0", "198.51.100.1", true, 9), storeNode("w0", "fe80::1%eth0\nx", true, 9)}, "2")
		}, false, []string{"m0=198.51.100.1+cp", "w0=+cp"}},
		{"delete of an unknown Node", func() error { return s.Delete(storeNode("x", "198.51.100.7", false, 1)) }, false, []string{"m0=198.51.100.1+cp", "w0=+cp"}},
		{"delete by tombstone", func() error { return s.Delete(cache.DeletedFinalStateUnknown{Key: "w0"}) }, true, []string{"m0=198.51.100.1+cp"}},
		{"relisting hides a deletion", func() error { return s.Replace(nil, "3") }, true, nil},
	}
	for _, st := range steps {
		before := changes
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := changes > before; got != st.render {
			t.Errorf("%s: render asked %v, want %v", st.name, got, st.render)
		}
		var got []string
		for _, n := range s.Nodes() {
			v := n.Name + "="
			for _, a := range n.Addresses {
				v += a.String()
			}
			if n.ControlPlane {
				v += "+cp"
			}
			got = append(got, v)
		}
		if !slices.Equal(got, st.nodes) {
			t.Errorf("%s: Nodes %v, want %v", st.name, got, st.nodes)
		}
	}
	if len(drops) != 3 {
		t.Errorf("drops %v, want the bad address twice and the bad name once (the watcher's dropper reports each once)", drops)
	}
	if !s.HasSynced() {
		t.Error("not synced after a listing")
	}
}

// The slice Nodes returns is built once per change and shared.
func TestNodeStoreSharesSorted(t *testing.T) {
	s := newNodeStore(func() {}, func(Drop) {})
	_ = s.Replace([]any{storeNode("b", "198.51.100.2", false, 1), storeNode("a", "198.51.100.1", false, 1)}, "1")
	first := s.Nodes()
	if got := []string{first[0].Name, first[1].Name}; !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("not sorted: %v", got)
	}
	_ = s.Update(storeNode("a", "198.51.100.1", false, 2))
	if again := s.Nodes(); &again[0] != &first[0] {
		t.Error("a heartbeat rebuilt the sorted Nodes")
	}
	_ = s.Update(storeNode("a", "198.51.100.5", false, 3))
	if got := s.Nodes()[0].Addresses; !slices.Equal(got, []netip.Addr{netip.MustParseAddr("198.51.100.5")}) {
		t.Errorf("after an address change a = %v", got)
	}
	if first[0].Addresses[0] != netip.MustParseAddr("198.51.100.1") {
		t.Error("a change modified a slice already handed out")
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

// TestOnce: each value is new once; past maxSeen values it starts over.
func TestOnce(t *testing.T) {
	var o Once[string]
	if !o.First("a") || o.First("a") || !o.First("b") {
		t.Fatal("a: new, then seen; b: new")
	}
	for i := range maxSeen {
		o.First(string(rune('c' + i)))
	}
	if !o.First("a") {
		t.Error("a after more than maxSeen values: want it reported again, not remembered for ever")
	}
}
