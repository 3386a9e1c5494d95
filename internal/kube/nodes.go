package kube

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/infradns/infradns/internal/cluster"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// NodeSelector says which Nodes a watch lists: those with a label, or the
// one with a name; the zero value is every Node.
type NodeSelector struct {
	Label string // a label key the Node must have (any value)
	Name  string // metadata.name
}

// Every Node.
var AllNodes = NodeSelector{}

func (s NodeSelector) String() string {
	switch {
	case s.Label != "":
		return "label " + s.Label
	case s.Name != "":
		return "name " + s.Name
	}
	return "all"
}

// LabelSelector and FieldSelector are the selector as list options carry it.
func (s NodeSelector) LabelSelector() string { return s.Label }

func (s NodeSelector) FieldSelector() string {
	if s.Name == "" {
		return ""
	}
	return "metadata.name=" + s.Name
}

// nodeStore is the reflector's store for Nodes. It holds each Node as the
// checked cluster.Node a render reads (name, InternalIPs, control-plane
// flag: a few dozen bytes instead of the ~15 KB the API sends) and asks for a
// render only when one of those changes. Kubelet rewrites its Node's status
// every few minutes (5,000 Nodes: ~17 updates/s) and nothing in them is
// ours; before this store each update re-listed, sorted and rendered every
// Node (20.7 ms per update at 5,000 Nodes, measured).
type nodeStore struct {
	changed func()
	drop    func(Drop)
	synced  atomic.Bool

	mu     sync.Mutex
	nodes  map[string]cluster.Node
	sorted []cluster.Node // nil after a change; rebuilt on the next read
}

func newNodeStore(changed func(), drop func(Drop)) *nodeStore {
	return &nodeStore{changed: changed, drop: drop, nodes: map[string]cluster.Node{}}
}

// Transformer trims in the reflector's own temporary store too (the
// watch-list stream keeps every object until the initial state is complete),
// so a full Node never outlives its decoding.
func (s *nodeStore) Transformer() cache.TransformFunc { return transformNode }

func (s *nodeStore) Add(obj any) error    { s.put(obj); return nil }
func (s *nodeStore) Update(obj any) error { s.put(obj); return nil }
func (s *nodeStore) Resync() error        { return nil }

func (s *nodeStore) put(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	node, valid := toNode(n, s.drop)
	s.mu.Lock()
	old, had := s.nodes[n.Name]
	switch {
	case !valid && !had, valid && had && sameNode(old, node):
		s.mu.Unlock()
		return // nothing a render reads changed: a heartbeat
	case valid:
		s.nodes[n.Name] = node
	default:
		delete(s.nodes, n.Name)
	}
	s.sorted = nil
	s.mu.Unlock()
	s.changed()
}

func (s *nodeStore) Delete(obj any) error {
	name := ""
	switch o := obj.(type) {
	case *corev1.Node:
		name = o.Name
	case cache.DeletedFinalStateUnknown:
		name = o.Key
	}
	s.mu.Lock()
	_, had := s.nodes[name]
	delete(s.nodes, name)
	if had {
		s.sorted = nil
	}
	s.mu.Unlock()
	if had {
		s.changed()
	}
	return nil
}

// Replace is a full listing: the first one is the sync; later ones (after a
// watch broke) may hide deletions and changes, so they ask for a render when
// the result differs.
func (s *nodeStore) Replace(list []any, _ string) error {
	next := make(map[string]cluster.Node, len(list))
	for _, obj := range list {
		if n, ok := obj.(*corev1.Node); ok {
			if node, valid := toNode(n, s.drop); valid {
				next[n.Name] = node
			}
		}
	}
	s.mu.Lock()
	same := len(next) == len(s.nodes)
	if same {
		for name, n := range next {
			if old, ok := s.nodes[name]; !ok || !sameNode(old, n) {
				same = false
				break
			}
		}
	}
	first := !s.synced.Swap(true)
	if !same {
		s.nodes, s.sorted = next, nil
	}
	s.mu.Unlock()
	if first || !same {
		s.changed()
	}
	return nil
}

func (s *nodeStore) HasSynced() bool { return s.synced.Load() }

// Nodes are the stored Nodes sorted by name. The slice is shared by every
// caller until the next change: callers must not modify it.
func (s *nodeStore) Nodes() []cluster.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sorted == nil {
		out := make([]cluster.Node, 0, len(s.nodes))
		for _, n := range s.nodes {
			out = append(out, n)
		}
		slices.SortFunc(out, func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) })
		s.sorted = out
	}
	return s.sorted
}

func sameNode(a, b cluster.Node) bool {
	return a.Name == b.Name && a.ControlPlane == b.ControlPlane && a.Excluded == b.Excluded && slices.Equal(a.Addresses, b.Addresses)
}

// modelLabels are the labels of a Node the model reads: the control-plane
// roles and the drain label.
var modelLabels = append(slices.Clone(controlPlaneLabels), LabelExcludeFromLB)

// trimNode is the one place that says what the model reads of a Node: it
// sets out to n's name, the modelLabels n carries and its InternalIP
// addresses (and the identity the reflector's stores key and order on). It
// is the Node store's transform, which only the watch-list sync and relists
// pass through, and toNode reads a Node only through it: a field toNode
// needs and trimNode drops is then missing on every path, where the first
// test of it fails, not on the watch-list path alone. (When it was missing
// there alone, a drained node was seen as not drained after every restart
// and relist.) out is the caller's so that toNode's stays on the stack: a
// heartbeat costs no 1 KB Node.
func trimNode(out, n *corev1.Node) {
	*out = corev1.Node{
		TypeMeta:   n.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion},
	}
	for _, l := range modelLabels {
		if v, ok := n.Labels[l]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[l] = v
		}
	}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			out.Status.Addresses = append(out.Status.Addresses, a)
		}
	}
}

// transformNode is trimNode as the store's cache.TransformFunc.
func transformNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown tombstone
	}
	out := new(corev1.Node)
	trimNode(out, n)
	return out, nil
}

// NodesFromSlices are the nodes the endpoints of slices name, each with the
// addresses of its endpoints, sorted. For a Service that selects a
// host-network pod on every node (infradns' DNS pods: their pod IPs are the
// node's InternalIPs), this is every node's name and addresses in objects
// that change when a pod comes or goes, not at every kubelet heartbeat, and
// that weigh ~100 bytes per node instead of a Node's ~10 KB. Readiness is
// not read: a name resolves whether or not its DNS pod is ready, as with
// Nodes. Values that fail the checks are left out.
func NodesFromSlices(slicesIn []*discoveryv1.EndpointSlice) []cluster.Node {
	return nodesFromSlices(slicesIn, func(Drop) {})
}

func nodesFromSlices(slicesIn []*discoveryv1.EndpointSlice, drop func(Drop)) []cluster.Node {
	byName := map[string][]netip.Addr{}
	for _, sl := range slicesIn {
		object := "EndpointSlice " + sl.Namespace + "/" + sl.Name
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || *ep.NodeName == "" {
				continue
			}
			name := *ep.NodeName
			if cluster.CheckNodeName(name) != nil {
				drop(Drop{Object: object, Field: "nodeName", Value: name, Reason: ReasonName})
				continue
			}
			for _, a := range ep.Addresses {
				if ip, ok := unicast(a, object, "address", drop); ok {
					byName[name] = append(byName[name], ip)
				}
			}
		}
	}
	out := make([]cluster.Node, 0, len(byName))
	for name, addrs := range byName {
		slices.SortFunc(addrs, netip.Addr.Compare)
		out = append(out, cluster.Node{Name: name, Addresses: slices.Compact(addrs)})
	}
	slices.SortFunc(out, func(a, b cluster.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}
