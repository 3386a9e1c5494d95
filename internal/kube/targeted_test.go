package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func names(s cluster.Snapshot) []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Name)
	}
	return out
}

// nodeSelectors are the list and watch requests the watcher made for Nodes,
// as "label=...|field=...".
func nodeSelectors(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if a.GetResource().Resource != "nodes" {
			continue
		}
		var l, f string
		switch x := a.(type) {
		case k8stesting.ListActionImpl:
			l, f = x.ListRestrictions.Labels.String(), x.ListRestrictions.Fields.String()
		case k8stesting.WatchActionImpl:
			l, f = x.WatchRestrictions.Labels.String(), x.WatchRestrictions.Fields.String()
		default:
			continue
		}
		out = append(out, a.GetVerb()+" label="+l+"|field="+f)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestWatcherTargeted checks that with a node name the watcher reads only
// the Nodes a render needs (its own, the control plane, the routers): a
// worker's update reaches it not at all, and a router moving to another node
// brings that Node in.
func TestWatcherTargeted(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(
		node("master-0", "198.51.100.11", true),
		node("master-1", "198.51.100.12", true),
		node("worker-0", "198.51.100.20", false),
		node("worker-1", "198.51.100.21", false),
		node("worker-2", "198.51.100.22", false),
		slice("default", "kubernetes", "kubernetes", 6443, ep{"198.51.100.11", "", yes}),
		slice("openshift-ingress", "router-a", "router-internal-default", 1936, ep{"10.128.0.5", "worker-1", yes}),
	)
	o := kube.NewOptions()
	o.NodeName = "worker-0"
	ch, calls, _ := watch(t, c, o)

	s := await(t, ch, "the initial state", func(s cluster.Snapshot) bool { return len(s.Nodes) > 0 })
	if got, want := names(s), []string{"master-0", "master-1", "worker-0", "worker-1"}; !slices.Equal(got, want) {
		t.Errorf("first snapshot has Nodes %v, want %v (worker-2 is neither this node, control plane nor a router)", got, want)
	}
	for _, sel := range nodeSelectors(c) {
		if sel == "list label=|field=" || sel == "watch label=|field=" {
			t.Errorf("watcher asked for every Node: %s", sel)
		}
	}

	// worker-2 changes address: not watched, no render.
	before := calls.Load()
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node("worker-2", "198.51.100.23", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The router moves from worker-1 to worker-2.
	r := slice("openshift-ingress", "router-a", "router-internal-default", 1936, ep{"10.128.0.5", "worker-2", yes})
	if _, err := c.DiscoveryV1().EndpointSlices("openshift-ingress").Update(ctx, r, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = await(t, ch, "worker-2 as the router", func(s cluster.Snapshot) bool {
		return slices.Equal(s.IngressNodes, []string{"worker-2"}) && slices.Contains(names(s), "worker-2")
	})
	if got, want := names(s), []string{"master-0", "master-1", "worker-0", "worker-2"}; !slices.Equal(got, want) {
		t.Errorf("after the move Nodes are %v, want %v", got, want)
	}
	if n, _ := s.Node("worker-2"); len(n.Addresses) != 1 || n.Addresses[0].String() != "198.51.100.23" {
		t.Errorf("worker-2 = %+v, want its current address 198.51.100.23", n)
	}
	if calls.Load()-before > 3 {
		t.Errorf("%d renders for one router move", calls.Load()-before)
	}
}

// TestWatcherManyRouters checks that with more router nodes than
// MaxNamedNodeWatches the watcher reads every Node with one watch.
func TestWatcherManyRouters(t *testing.T) {
	objs := []runtime.Object{node("master-0", "198.51.100.11", true), slice("default", "kubernetes", "kubernetes", 6443, ep{"198.51.100.11", "", yes})}
	var eps []ep
	for i := range kube.MaxNamedNodeWatches + 1 {
		name := fmt.Sprintf("worker-%d", i)
		objs = append(objs, node(name, fmt.Sprintf("198.51.100.%d", 100+i), false))
		eps = append(eps, ep{fmt.Sprintf("10.128.0.%d", 10+i), name, yes})
	}
	objs = append(objs, node("idle", "198.51.100.99", false))
	objs = append(objs, slice("openshift-ingress", "router-a", "router-internal-default", 1936, eps...))
	c := fake.NewClientset(objs...)
	o := kube.NewOptions()
	o.NodeName = "master-0"
	ch, _, _ := watch(t, c, o)
	s := await(t, ch, "the initial state", func(s cluster.Snapshot) bool { return len(s.Nodes) > 0 })
	if !slices.Contains(names(s), "idle") {
		t.Errorf("Nodes %v: with %d routers every Node should be watched", names(s), kube.MaxNamedNodeWatches+1)
	}
	if got := nodeSelectors(c); !slices.Equal(got, []string{"list label=|field=", "watch label=|field="}) {
		t.Errorf("Node requests %v, want one list and watch of every Node", got)
	}
}

// TestWatcherHeartbeat checks a Node update that changes nothing a render
// reads (kubelet's status heartbeat) calls no handler.
func TestWatcherHeartbeat(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(node("master-0", "198.51.100.11", true), node("worker-0", "198.51.100.20", false))
	o := kube.NewOptions()
	o.NodesOnly = true
	o.Debounce = time.Millisecond
	ch, calls, _ := watch(t, c, o)
	await(t, ch, "the initial state", func(s cluster.Snapshot) bool { return len(s.Nodes) == 2 })
	// The initial listing may reach the handler in one call or, with a 1 ms
	// debounce on a loaded machine, two, the second after the snapshot
	// awaited above (it failed CI once so): count from when no call has
	// come for 200 ms (200 debounces), before any heartbeat is sent.
	initial := calls.Load()
	for quiet, deadline := time.Now(), time.Now().Add(5*time.Second); time.Since(quiet) < 200*time.Millisecond && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n := calls.Load(); n != initial {
			initial, quiet = n, time.Now()
		}
	}

	for i := range 20 {
		n := node("worker-0", "198.51.100.20", false)
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.NewTime(time.Unix(int64(1000+i), 0))}}
		n.Labels["kubernetes.io/hostname"] = fmt.Sprint(i) // a label nothing reads
		if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A real change after the heartbeats: once it is seen, every heartbeat
	// before it has been through the store.
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node("worker-0", "198.51.100.21", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await(t, ch, "the new address", func(s cluster.Snapshot) bool {
		n, _ := s.Node("worker-0")
		return len(n.Addresses) == 1 && n.Addresses[0].String() == "198.51.100.21"
	})
	if got := calls.Load() - initial; got != 1 {
		t.Errorf("%d handler calls after the initial state, want 1 (the address change; 20 heartbeats cost none)", got)
	}
}

// TestWatcherNamesService checks the node names come from the names
// service's EndpointSlices while it lists any (and no Node is watched then),
// and from the Nodes while it lists none.
func TestWatcherNamesService(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(node("master-0", "198.51.100.11", true), node("worker-0", "198.51.100.20", false))
	o := kube.NewOptions()
	o.NodesOnly = true
	o.NamesService = "kube-system/infradns-nodes"
	ch, calls, _ := watch(t, c, o)
	s := await(t, ch, "Nodes while the service lists nothing", func(s cluster.Snapshot) bool { return len(s.Nodes) == 2 })
	if n, _ := s.Node("worker-0"); len(n.Addresses) != 1 || n.Addresses[0].String() != "198.51.100.20" {
		t.Errorf("worker-0 = %+v", n)
	}

	v4 := slice("kube-system", "infradns-nodes-abc", "infradns-nodes", 53,
		ep{"198.51.100.11", "master-0", yes}, ep{"198.51.100.20", "worker-0", no}, ep{"198.51.100.30", "worker-1", nil})
	v6 := slice("kube-system", "infradns-nodes-def", "infradns-nodes", 53, ep{"2001:db8::20", "worker-0", yes}, ep{"2001:db8::99", "Bad_Name", yes})
	v6.AddressType = "IPv6"
	for _, sl := range []*discoveryv1.EndpointSlice{v4, v6} {
		if _, err := c.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s = await(t, ch, "the service's nodes", func(s cluster.Snapshot) bool {
		n, _ := s.Node("worker-0")
		return len(s.Nodes) == 3 && len(n.Addresses) == 2
	})
	want := map[string]string{"master-0": "[198.51.100.11]", "worker-0": "[198.51.100.20 2001:db8::20]", "worker-1": "[198.51.100.30]"}
	for _, n := range s.Nodes {
		if got := fmt.Sprint(n.Addresses); got != want[n.Name] {
			t.Errorf("%s: %s, want %s (not-ready endpoints count: a name resolves whatever its pod's state)", n.Name, got, want[n.Name])
		}
	}

	// No Node watch now: a Node's address change renders nothing.
	before := calls.Load()
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node("worker-0", "198.51.100.21", false), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if calls.Load() != before {
		t.Errorf("a Node update rendered while the names service serves")
	}

	// The service goes away: back to the Nodes, with what they say now.
	for _, n := range []string{v4.Name, v6.Name} {
		if err := c.DiscoveryV1().EndpointSlices("kube-system").Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	await(t, ch, "Nodes again", func(s cluster.Snapshot) bool {
		n, _ := s.Node("worker-0")
		return len(s.Nodes) == 2 && len(n.Addresses) == 1 && n.Addresses[0].String() == "198.51.100.21"
	})
}
