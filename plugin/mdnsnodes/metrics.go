package mdnsnodes

import (
	"sync/atomic"

	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/authority"
	"github.com/infradns/infradns/internal/kube"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	// kubeClient is the kubeconfig client last built, for certExpiry.
	kubeClient atomic.Pointer[kube.Reloading]
	certExpiry = promauto.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "kubeconfig_cert_expiry_timestamp_seconds",
		Help:      "When the client certificate of mdnsnodes' kubeconfig expires (Unix time), 0 without one (a token, no kubeconfig). Followed when the kubeconfig or its files change.",
	}, func() float64 { return kube.CertExpirySeconds(kubeClient.Load()) })
	// requestCount counts the queries mdnsnodes handled, by what it did with them.
	requestCount = authority.NewCounter(promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "requests_total",
		Help:      "Counter of queries handled by mdnsnodes, by result (answer, nodata, nxdomain, fallthrough, passed, notready).",
	}, []string{"server", "result"}))
	// nodes is the number of nodes currently served.
	nodes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "nodes",
		Help:      "Gauge of the nodes mdnsnodes currently knows, by zones.",
	}, []string{"zones"})
	// sourceNodes splits what is merged into nodes: a node heard on the link
	// and listed by the API counts in both.
	sourceNodes = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "source_nodes",
		Help:      "Gauge of the nodes each source knows before the merge, by zones and source (mdns, api).",
	}, []string{"zones", "source"})
	accepted = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "announcements_accepted_total",
		Help:      "Counter of mDNS records (instances and host address sets) accepted into the cache, by zones.",
	}, []string{"zones"})
	rejected = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "announcements_rejected_total",
		Help:      "Counter of mDNS announcements rejected, by zones and reason.",
	}, []string{"zones", "reason"})
	// dropped counts the address records left out of accepted
	// announcements: over a limit of the cache, or a VIP.
	dropped = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "records_dropped_total",
		Help:      "Counter of mDNS address records not cached, by zones and reason (host_limit, source_limit, full, vip).",
	}, []string{"zones", "reason"})
	ttlCapped = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "records_ttl_capped_total",
		Help:      "Counter of mDNS records cached with their TTL lowered to 4500 seconds, by zones.",
	}, []string{"zones"})
	queries = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "queries_sent_total",
		Help:      "Counter of mDNS queries sent, by zones.",
	}, []string{"zones"})
)
