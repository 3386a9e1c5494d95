package lbconfig

import (
	"errors"
	"sync/atomic"

	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/kube"
	"github.com/infradns/infradns/internal/lb"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Values of reloads_total's result label.
const (
	reloadSuccess = "success"
	reloadFailure = "failure"
	// The daemon was not running yet: it reads the file when it starts.
	reloadNotRunning = "not_running"
)

var (
	rendersCount = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "renders_total",
		Help:      "Counter of configurations rendered from a cluster snapshot.",
	})
	refusedCount = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "refused_snapshots_total",
		Help:      "Counter of snapshots not rendered (no nodes, backends or peers); the last good files were kept.",
	})
	validationFailures = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "validation_failures_total",
		Help:      "Counter of renders rejected by keepalived -t or haproxy -c, by file; the old file was kept.",
	}, []string{"file"})
	writesCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "writes_total",
		Help:      "Counter of configuration files replaced, by file.",
	}, []string{"file"})
	reloadsCount = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "reloads_total",
		Help:      "Counter of reloads of keepalived or haproxy, by file and result (success, failure, not_running).",
	}, []string{"file", "result"})
	vrrpConflicts = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "vrrp_conflicts",
		Help:      "Other VRRP routers on the link that clash with this node's instances, by kind (foreign-addresses, vip-under-other-id, unknown-peer).",
	}, []string{"kind"})
	vrrpAdverts = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "vrrp_adverts_total",
		Help:      "Counter of VRRP adverts heard on the VRRP interface, by verdict: peer (a group peer's advert for its VIPs), other (about the cluster's router IDs or VIPs, from anyone else: the conflict guard's only), unrelated (dropped), invalid (malformed, or sent from off the link).",
	}, []string{"verdict"})
	splitBrainEvents = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "vrrp_split_brain_total",
		Help:      "Counter of split-brain checks' decisions, by group and event: kept (another node held our VIP, the rule kept it here), stepped-down, resumed-adverts-heard, resumed-holder-gone, foreign (a host that is no cluster node answered ARP for our VIP), kept-keeper-dead (the other holder does not serve: a paused node), resumed-keeper-dead.",
	}, []string{"group", "event"})
	splitSteppedDown = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "vrrp_stepped_down",
		Help:      "Whether the split-brain check holds the group in FAULT (1) or not (0), by group.",
	}, []string{"group"})
	// kubeClient is the kubeconfig client last built, for certExpiry.
	kubeClient atomic.Pointer[kube.Reloading]
	certExpiry = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "kubeconfig_cert_expiry_timestamp_seconds",
		Help:      "When the client certificate of lbconfig's kubeconfig expires (Unix time), 0 without one (a token, in-cluster). Followed when the kubeconfig or its files change.",
	}, func() float64 { return kube.CertExpirySeconds(kubeClient.Load()) })
	holderBoosted = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "vrrp_holder_boosted",
		Help:      "Whether this node's priority for the group is raised (1) because it took the group over and the holder it replaced may come back (a paused node), or not (0), by group.",
	}, []string{"group"})
	frozenServersDown = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "frozen_apiservers_total",
		Help:      "Counter of apiservers taken out of this node's haproxy because their node was found paused after a takeover (it accepts connections and never answers), by result (down, failed).",
	}, []string{"result"})
	staleVIPsRemoved = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "stale_vips_removed_total",
		Help:      "Counter of VIPs removed from the interface because keepalived was not running (killed with SIGKILL).",
	})
	handoverRelays = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "handover_relays_total",
		Help:      "Counter of hand-over relays: a VIP another node resigned (VRRP) or left (BGP) whose stray connections are passed back to it, by result (started, failed).",
	}, []string{"result"})
	vipHeld = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "vip_held",
		Help:      "Whether this node holds the VIP (1) or not (0), by vip and group (api, ingress, ingress-2, ...).",
	}, []string{"vip", "group"})
	droppedValues = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "dropped_values_total",
		Help:      "Counter of values from the API left out of every render, by field (name, InternalIP, address, port, nodeName) and reason.",
	}, []string{"field", "reason"})
	lastSuccess = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "last_success_timestamp_seconds",
		Help:      "Time of the last snapshot whose files were all valid, written and reloaded.",
	})
)

var (
	bgpSessionUp = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "bgp_session_up",
		Help:      "Whether the BGP session with a peer is established (1) or not (0), by peer (vip-mode bgp, embedded speaker).",
	}, []string{"peer"})
	bgpAnnounced = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "bgp_announced",
		Help:      "Whether this node announces the VIP's host route (1) or not (0), by vip (vip-mode bgp).",
	}, []string{"vip"})
)

// reloadResult is the result label of a reload's error.
func reloadResult(err error) string {
	switch {
	case err == nil:
		return reloadSuccess
	case errors.Is(err, lb.ErrNotRunning):
		return reloadNotRunning
	}
	return reloadFailure
}
