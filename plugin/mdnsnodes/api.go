package mdnsnodes

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/mdns"
	"github.com/infradns/infradns/internal/records"
)

// Label values of sourceNodes.
const (
	sourceMDNS = "mdns"
	sourceAPI  = "api"
)

// apiIndex turns a Node list into the labels it serves: the first DNS label
// of each Node name, lower-cased, with the Node's InternalIPs. Names that are
// not a host label or that another plugin owns are left out, like the mDNS
// cache leaves them out, and so is a Node without a usable InternalIP: it
// would only be NODATA for both families. Two Nodes with the same first
// label (master-0 and master-0.ocp4.example.com) are one name: the Node whose
// name sorts first serves it, so the answer does not depend on list order.
func apiIndex(nodes []cluster.Node, reserved []string, vips []netip.Addr) map[string]records.Set {
	out := make(map[string]records.Set, len(nodes))
	owner := make(map[string]string, len(nodes))
	for _, n := range nodes {
		l, _, _ := strings.Cut(strings.ToLower(n.Name), ".")
		if !mdns.ValidHostLabel(l) || slices.Contains(reserved, l) {
			continue
		}
		if o, dup := owner[l]; dup && o < n.Name {
			continue
		}
		// A VIP is no node's address, whatever a Node lists (kubelet picks
		// one up from an interface keepalived put it on): the same rule as
		// for what mDNS hears.
		set := records.SetOf(slices.DeleteFunc(slices.Clone(n.Addresses), func(a netip.Addr) bool { return slices.Contains(vips, a.Unmap()) }))
		if set.Empty() {
			continue
		}
		out[l], owner[l] = set, n.Name
	}
	return out
}

// merge returns what is served: every label either source knows. A label
// both know takes its whole answer from one of them:
//
//   - signed (the plugin has a key: every announcement heard was signed by a
//     key holder, a node): from mDNS. The node's own announcement follows an
//     address change within a second, while the kubelet updates the Node's
//     addresses later.
//   - unsigned (no key): from the API. Any host on the link can announce
//     any name; the API's Node is what the cluster itself registered, so a
//     forged announcement must not override it. mDNS still serves the names
//     the API does not know (before the API is up, a node that has not
//     registered yet).
//
// Neither input is modified; the result may share heard.
func merge(heard *nodeIndex, api map[string]records.Set, signed bool) *nodeIndex {
	if len(api) == 0 {
		if heard == nil {
			return &nodeIndex{}
		}
		return heard
	}
	out := &nodeIndex{nodes: make(map[string]records.Set, heard.Len()+len(api))}
	if heard != nil {
		for l, s := range heard.nodes {
			out.nodes[l] = s
		}
	}
	for l, s := range api {
		if _, both := out.nodes[l]; both && signed {
			continue
		}
		out.nodes[l] = s
	}
	return out
}

// publish merges the latest of both sources into the index ServeDNS reads.
func (m *MDNSNodes) publish() {
	m.publishMu.Lock()
	defer m.publishMu.Unlock()
	heard := m.heard.Load()
	var api map[string]records.Set
	if p := m.api.Load(); p != nil {
		api = *p
	}
	ix := merge(heard, api, m.signed()).withReverse(m.Zones)
	m.index.Store(ix)

	server := m.zonesLabel()
	nodes.WithLabelValues(server).Set(float64(ix.Len()))
	if m.listens() {
		sourceNodes.WithLabelValues(server, sourceMDNS).Set(float64(heard.Len()))
	}
	if m.watches() {
		sourceNodes.WithLabelValues(server, sourceAPI).Set(float64(len(api)))
	}
}

// startJitter spreads the first Node (or names service) list of nodes
// that start together.
var startJitter = time.Second

// firstListWarning is how long after the client is built a missing first
// Node list is logged.
const firstListWarning = 10 * time.Second

// lastAPI hands the API's last Node list (per kubeconfig) from an instance
// to the one that replaces it at a reload: the new one starts with no list of
// its own, and during an API outage it would not get one for as long as the
// outage lasts.
var lastAPI sync.Map // kubeconfig → *map[string]records.Set

// takeOver starts from the previous instance's Node list, if there was one.
// It is a full list from the API, as stale as the old instance's answers
// were, so it counts as the first list for readiness; the watch replaces it
// as soon as the API answers.
func (m *MDNSNodes) takeOver() {
	v, ok := lastAPI.Load(m.kubeconfig)
	if !ok {
		return
	}
	m.api.Store(v.(*map[string]records.Set))
	m.publish()
	m.apiSynced.Store(true)
}

// watchAPI follows the Nodes until ctx ends. The reflectors keep the last
// list while the API is unreachable, so the names stay served.
func (m *MDNSNodes) watchAPI(ctx context.Context) {
	client := kube.WaitClient(ctx, m.client, log.Warningf)
	if client == nil {
		return // cancelled
	}
	defer kube.Follow(ctx, client)()
	// The reflectors' own errors (refused, forbidden) reach no log in this
	// binary: say at least that the list has not come.
	slow := time.AfterFunc(firstListWarning, func() {
		if !m.apiSynced.Load() {
			log.Warningf("no Node list from the API after %s: is it reachable, and may this identity list and watch nodes?", firstListWarning)
		}
	})
	defer slow.Stop()
	o := kube.NewOptions()
	o.Dropped = func(d kube.Drop) {
		log.Warningf("not a node record: %s %s %q (%s)", d.Object, d.Field, d.Value, d.Reason)
	}
	o.NodesOnly = true
	o.NamesService = m.namesService
	// mDNS and the previous instance's list serve meanwhile.
	o.StartJitter = startJitter
	err := kube.New(client, o).Run(ctx, func(_ context.Context, s cluster.Snapshot) error {
		api := apiIndex(s.Nodes, m.reserved, m.vips)
		m.api.Store(&api)
		lastAPI.Store(m.kubeconfig, &api)
		m.publish()
		if !m.apiSynced.Swap(true) {
			log.Infof("%d of %d Nodes from the API", len(api), len(s.Nodes))
		}
		return nil
	})
	if err != nil {
		log.Errorf("watch: %v", err)
	}
}

func (m *MDNSNodes) client() (kube.Client, error) {
	if m.newClient != nil {
		return m.newClient()
	}
	// Rebuilt when the file or one it names changes (watchAPI runs it): a
	// pod may read it mid-edit, and its credentials are rotated with no
	// restart.
	r, err := kube.NewReloading(m.kubeconfig, "infradns-mdnsnodes", log.Infof, log.Warningf)
	if err != nil {
		return nil, err
	}
	kubeClient.Store(r)
	return r, nil
}
