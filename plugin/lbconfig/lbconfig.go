// Package lbconfig implements the lbconfig plugin: it keeps the keepalived and
// haproxy configuration of a node in step with the cluster. It serves no DNS;
// it lives in CoreDNS so the one static pod every node runs carries it.
package lbconfig

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lb"

	"github.com/miekg/dns"
)

// LBConfig is the lbconfig handler and the owner of its controller.
type LBConfig struct {
	Next plugin.Handler

	// model is the checked cluster model the options built; the node name
	// and interface are filled in at Start.
	model      *cluster.Model
	kubeconfig string
	outputs    map[lb.Kind]output
	reload     map[lb.Kind]reloadSpec
	// guardWindow is how long to listen for other VRRP routers before the
	// first keepalived write; 0 turns the guard off.
	guardWindow time.Duration
	// statusNS, when set, is the namespace of the VIP holder Leases.
	statusNS string
	// services, when set, announces the Services' addresses (vip-mode bgp);
	// servicesHealth is the URL that gates them ("" or none: nothing).
	services       *serviceOpts
	servicesHealth string
	// noRelay turns BGP mode's hand-over relay off (bgp-relay off).
	noRelay bool
	// resolverReady is the node resolver's readiness URL (resolver-ready):
	// BGP mode holds and announces the API VIP only once it passed.
	resolverReady string
	// tools validates renders; tests point it into a network namespace.
	tools lb.Tools
	// newClient replaces the kubeconfig lookup in tests (a fake clientset).
	newClient func() (kube.Client, error)

	mu      sync.Mutex
	cancel  context.CancelFunc
	done    chan struct{}
	watcher atomic.Pointer[kube.Watcher]
	// applied is set after the first successful apply (static mode's readiness).
	applied atomic.Bool
	// ann is the BGP announcer (vip-mode bgp), from adoption to Stop;
	// atomic because Stop holds mu while the controller's hooks still read it.
	ann atomic.Pointer[bgp.Announcer]
	// holdsAnn: Start took a reference on the shared announcer (under mu).
	holdsAnn bool

	// inCaddy: set up from a Corefile, so it acts only once caddy adopts
	// its instance (lifecycle.go).
	inCaddy bool
	// gen is this Start's generation and adopted is closed once it may act
	// (both under gens' lock).
	gen     uint64
	adopted chan struct{}
}

func (l *LBConfig) announcer() *bgp.Announcer { return l.ann.Load() }

type output struct {
	path     string
	template string
}

// reloadSpec is a parsed reload option: pidfile, socket, none or command.
type reloadSpec struct {
	method string
	path   string
	argv   []string
}

// Default reload targets: keepalived's own pid file, and the master socket
// the haproxy static pod is started with (haproxy -W -S).
const (
	DefaultKeepalivedPidfile = "/run/keepalived.pid"
	DefaultHAProxySocket     = "/run/haproxy/master.sock"
)

// New returns an LBConfig with the defaults.
func New() *LBConfig {
	return &LBConfig{
		outputs:     map[lb.Kind]output{},
		guardWindow: DefaultGuardWindow,
		reload: map[lb.Kind]reloadSpec{
			lb.Keepalived: {method: "pidfile", path: DefaultKeepalivedPidfile},
			lb.HAProxyCfg: {method: "socket", path: DefaultHAProxySocket},
		},
	}
}

// ServeDNS implements the plugin.Handler interface: lbconfig answers nothing.
func (l *LBConfig) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	return plugin.NextOrFailure(l.Name(), l.Next, ctx, w, r)
}

// Name implements the plugin.Handler interface.
func (l *LBConfig) Name() string { return pluginName }
