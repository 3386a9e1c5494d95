package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/kubetest"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	watchpkg "k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/tools/cache"
)

// nodeStream serves Nodes as the API server does in either list mode of
// client-go's reflector: a LIST, then a WATCH from its resourceVersion; or
// a watch-list, one WATCH with sendInitialEvents that streams every Node as
// ADDED and marks the end of the initial state with a bookmark. The
// reflector, its temporary store and the Node store's transform are
// client-go's and the package's own.
type nodeStream struct {
	mu         sync.Mutex
	nodes      map[string]*corev1.Node
	rv         int
	open       *watchpkg.RaceFreeFakeWatcher
	lists      int // LISTs served
	watchLists int // watch-lists served
}

func newNodeStream(nodes ...*corev1.Node) *nodeStream {
	s := &nodeStream{nodes: map[string]*corev1.Node{}, rv: 1}
	for _, n := range nodes {
		s.set(n)
	}
	return s
}

// set stores n without telling the open watch, as when events are lost: only
// a relist brings it.
func (s *nodeStream) set(n *corev1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	n = n.DeepCopy()
	n.ResourceVersion = strconv.Itoa(s.rv)
	s.nodes[n.Name] = n
}

// modify stores n and sends it on the open watch.
func (s *nodeStream) modify(n *corev1.Node) {
	s.set(n)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open.Modify(s.nodes[n.Name].DeepCopy())
}

// expire ends the open watch with 410 Gone, as an API server does when the
// watch's resourceVersion is compacted or its watch cache restarts: the
// reflector lists again.
func (s *nodeStream) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
}

func (s *nodeStream) served() (lists, watchLists int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists, s.watchLists
}

func (s *nodeStream) sorted() []*corev1.Node {
	var out []*corev1.Node
	for _, n := range s.nodes {
		out = append(out, n.DeepCopy())
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (s *nodeStream) ListerWatcher() cache.ListerWatcher {
	return &cache.ListWatch{
		ListWithContextFunc: func(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lists++
			list := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
			for _, n := range s.sorted() {
				list.Items = append(list.Items, *n)
			}
			return list, nil
		},
		WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watchpkg.Interface, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			w := watchpkg.NewRaceFreeFake()
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				s.watchLists++
				for _, n := range s.sorted() {
					w.Add(n)
				}
				w.Action(watchpkg.Bookmark, &corev1.Node{ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(s.rv),
					Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}})
			}
			s.open = w
			return w, nil
		},
	}
}

// streamClient is a kube.Client whose Nodes come from a nodeStream; a
// NodesOnly watcher asks it for nothing else.
type streamClient struct {
	kube.Client
	nodes *nodeStream
}

func (c streamClient) Nodes(kube.NodeSelector) cache.ListerWatcher { return c.nodes.ListerWatcher() }

// fullNode is a Node as kubelet keeps it (13 labels of its own, a Hostname
// address, conditions, images) with the given name, labels and
// addresses (InternalIP unless prefixed "ExternalIP:").
func fullNode(name string, labels map[string]string, addrs ...string) *corev1.Node {
	n := kubetest.RealisticNode(0, 1)
	n.Name = name
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
	for _, a := range addrs {
		typ := corev1.NodeInternalIP
		if ip, ok := strings.CutPrefix(a, "ExternalIP:"); ok {
			typ, a = corev1.NodeExternalIP, ip
		}
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: typ, Address: a})
	}
	for k, v := range labels {
		n.Labels[k] = v
	}
	return n
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// TestNodeFieldsInBothListModes feeds every field toNode reads (the name,
// each control-plane label, the drain label with and without a value,
// InternalIPs of both families, beside fields it must not read) through
// client-go's reflector and the Node store's transform, in both list modes:
// the watch-list the pinned client-go uses by default, whose initial state
// and relists pass through the transform, and LIST+WATCH
// (KUBE_FEATURE_WatchListClient=false), where nothing does. The snapshots
// must be what toNode makes of the full Nodes, at the first sync, after a
// drain seen as a watch event and after a relist. The watch-list once lost
// the drain label in the transform: a drained node took its VIPs back
// after every restart and relist.
func TestNodeFieldsInBothListModes(t *testing.T) {
	nodes := []struct {
		node *corev1.Node
		want cluster.Node
	}{
		{fullNode("master-0", map[string]string{"node-role.kubernetes.io/control-plane": ""}, "198.51.100.10", "fd00::10", "ExternalIP:203.0.113.10"),
			cluster.Node{Name: "master-0", ControlPlane: true, Addresses: addrs("198.51.100.10", "fd00::10")}},
		{fullNode("master-1", map[string]string{"node-role.kubernetes.io/master": "", kube.LabelExcludeFromLB: "true"}, "198.51.100.11"),
			cluster.Node{Name: "master-1", ControlPlane: true, Excluded: true, Addresses: addrs("198.51.100.11")}},
		{fullNode("worker-0", map[string]string{kube.LabelExcludeFromLB: ""}, "fd00::20"),
			cluster.Node{Name: "worker-0", Excluded: true, Addresses: addrs("fd00::20")}},
		{fullNode("worker-1", nil, "198.51.100.21"),
			cluster.Node{Name: "worker-1", Addresses: addrs("198.51.100.21")}},
	}
	var initial []*corev1.Node
	var want []cluster.Node
	for _, n := range nodes {
		if got := kube.ToNode(n.node); fmt.Sprint(got) != fmt.Sprint(n.want) {
			t.Fatalf("ToNode(%s) = %+v, want %+v", n.node.Name, got, n.want)
		}
		initial = append(initial, n.node)
		want = append(want, n.want)
	}
	for _, mode := range []struct {
		name      string
		watchList bool
	}{
		{"watch-list", true},
		{"list", false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, mode.watchList)
			stream := newNodeStream(initial...)
			o := kube.NewOptions()
			o.NodesOnly = true
			ch, _, _ := watchClient(t, streamClient{nodes: stream}, o)
			check := func(what string, s cluster.Snapshot, want []cluster.Node) {
				t.Helper()
				if fmt.Sprint(s.Nodes) != fmt.Sprint(want) {
					t.Errorf("%s: Nodes =\n  %+v\nwant\n  %+v", what, s.Nodes, want)
				}
			}
			check("first sync", await(t, ch, "the first sync", func(s cluster.Snapshot) bool { return len(s.Nodes) > 0 }), want)

			// worker-1 drained while the watch runs: an event.
			drained := fullNode("worker-1", map[string]string{kube.LabelExcludeFromLB: ""}, "198.51.100.21")
			stream.modify(drained)
			want := slices.Clone(want)
			want[3].Excluded = true
			check("drain event", await(t, ch, "worker-1 drained", func(s cluster.Snapshot) bool {
				n, _ := s.Node("worker-1")
				return n.Excluded
			}), want)

			// A node joins while events are lost; the relist brings it
			// and must keep every drained node drained.
			stream.set(fullNode("master-2", map[string]string{"node-role.kubernetes.io/control-plane": ""}, "198.51.100.12"))
			stream.expire()
			want = slices.Insert(want, 2, cluster.Node{Name: "master-2", ControlPlane: true, Addresses: addrs("198.51.100.12")})
			check("relist", await(t, ch, "master-2 after the relist", func(s cluster.Snapshot) bool {
				_, ok := s.Node("master-2")
				return ok
			}), want)

			lists, watchLists := stream.served()
			if mode.watchList && (watchLists != 2 || lists != 0) || !mode.watchList && (lists != 2 || watchLists != 0) {
				t.Errorf("served %d LISTs and %d watch-lists, want 2 initial states (sync and relist) in %s mode alone", lists, watchLists, mode.name)
			}
		})
	}
}
