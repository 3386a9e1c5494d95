// Package lb turns the state of a cluster into keepalived and haproxy
// configuration. The pure part: Desired (what the files must say; lb.go,
// desired.go), Render (text/template, deterministic; render.go) and the
// bootstrap cluster file (clusterfile.go). The I/O part, each piece behind a
// small interface or func: Validate with the real tools (validate.go), Install
// (validate, then write if changed), Reload (reload.go), the health probes
// that feed keepalived's track files (health.go), the interface lookup
// (netif.go), and the Controller that chains them for each snapshot
// (controller.go). Informers live in internal/kube, VRRP in internal/vrrp.
package lb

import (
	"errors"
	"net/netip"
	"time"

	"github.com/infradns/infradns/internal/vrrp"
)

// Node is what the configuration needs of a Kubernetes Node.
type Node struct {
	Name string
	// Addresses are the node's InternalIP addresses.
	Addresses []netip.Addr
	// ControlPlane nodes run an apiserver and may hold the API VIP.
	ControlPlane bool
}

// Snapshot is the cluster state one render is made from.
type Snapshot struct {
	Nodes []Node
	// APIServers are the ready endpoints of default/kubernetes.
	APIServers []netip.AddrPort
	// IngressNodes are the names of the nodes with a ready default router:
	// the only ones that may hold the ingress VIP.
	IngressNodes []string
}

// Config is the part of the Corefile that shapes the output.
type Config struct {
	Cluster string
	// NodeName is this node's Node object name.
	NodeName string
	// NodeIPs, when set, are this node's addresses (the node-ip option);
	// otherwise they come from its Node object.
	NodeIPs   []netip.Addr
	Interface string
	// APIVIPs and IngressVIPs hold at most one address per family.
	APIVIPs     []netip.Addr
	IngressVIPs []netip.Addr
	// APIPort is the port of static backends given without one.
	APIPort uint16
	// LBPort is haproxy's API frontend; HealthPort serves its monitor-uri.
	LBPort     uint16
	HealthPort uint16
	RouterIDs  vrrp.RouterIDs
	// VRRPVersion is 3 (sub-second adverts, no authentication) or 2
	// (whole-second adverts, PASS authentication as OpenShift sets it).
	VRRPVersion    int
	AdvertInterval time.Duration
	// Unicast lists peers from Node objects instead of using multicast.
	Unicast bool
	// StaticBackends serve the API before it can be asked (bootstrap).
	StaticBackends []netip.AddrPort
	// TrackDir holds the health files keepalived watches (track_file): 0
	// while healthy, anything else puts the instance in FAULT at once.
	TrackDir string
}

// Defaults, chosen from the lab figures in the README: 0.1 s adverts move a
// VIP in ~0.4 s after a crash and never flapped on a loaded 2-core machine;
// 0.05 s halves that but flapped under the heaviest load.
const (
	DefaultAPIPort        = 6443
	DefaultLBPort         = 9445
	DefaultHealthPort     = 9454
	DefaultVRRPVersion    = 3
	DefaultAdvertInterval = 100 * time.Millisecond
	DefaultTrackDir       = "/run/infradns"
	// Priority is every eligible node's VRRP priority: health acts through
	// FAULT (track_file weight 0), not weights, so failover waits for no
	// priority race (the lab measured 3.5 s for the weighted style).
	Priority = 100
)

// NewConfig returns a Config with the defaults set.
func NewConfig() Config {
	return Config{
		APIPort:        DefaultAPIPort,
		LBPort:         DefaultLBPort,
		HealthPort:     DefaultHealthPort,
		VRRPVersion:    DefaultVRRPVersion,
		AdvertInterval: DefaultAdvertInterval,
		TrackDir:       DefaultTrackDir,
	}
}

// Errors for a snapshot that must not be rendered: the caller keeps the
// last good files. An empty backend or peer list almost always means the API
// could not be read, and rendering it would take the VIP or the API down.
var (
	ErrNoNodes    = errors.New("snapshot has no nodes")
	ErrNoBackends = errors.New("no ready apiserver endpoints and no static backends")
	ErrNoPeers    = errors.New("unicast peer list is empty")
)
