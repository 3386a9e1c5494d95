package lbpools

import (
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/lbpool"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	leaderVec = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "leader",
		Help:      "1 while this instance allocates (holds the Lease), else 0.",
	}, []string{})
	configVec = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "config_valid",
		Help:      "0 while the pools ConfigMap does not parse (the last valid pools stay in use), else 1.",
	}, []string{})
	poolSize = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "pool_addresses",
		Help:      "Gauge of the addresses of each pool, by pool and family (capped at 2^53); set by the allocating instance.",
	}, []string{"pool", "family"})
	poolUsed = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "pool_addresses_used",
		Help:      "Gauge of the addresses of each pool given to Services, by pool and family; set by the allocating instance.",
	}, []string{"pool", "family"})
	pendingVec = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "services_pending",
		Help:      "Gauge of the Services of our class without all their addresses; set by the allocating instance.",
	}, []string{})
	orphanedVec = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "addresses_orphaned",
		Help:      "Gauge of addresses Services keep though no pool of their namespace holds them any more; set by the allocating instance.",
	}, []string{})
	unannouncedVec = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "services_unannounced",
		Help:      "Gauge of the Services with an address that no node may announce over BGP (externalTrafficPolicy Local, no ready endpoint); set by the allocating instance with 'announce'.",
	}, []string{})
	allocations = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "allocations_total",
		Help:      "Counter of Service statuses written with new addresses.",
	})
	writeErrors = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "write_errors_total",
		Help:      "Counter of Service status writes that failed (other than a conflict or a deleted Service, which are decided again).",
	})
)

// The unlabelled gauges are made on first use, not at init: every CoreDNS
// of the build would otherwise export leader 0 and config_valid 0, and the
// alerts on them would fire on every node that does not run lbpools.
func leader() prometheus.Gauge      { return leaderVec.WithLabelValues() }
func configValid() prometheus.Gauge { return configVec.WithLabelValues() }
func pending() prometheus.Gauge     { return pendingVec.WithLabelValues() }
func orphaned() prometheus.Gauge    { return orphanedVec.WithLabelValues() }
func unannounced() prometheus.Gauge { return unannouncedVec.WithLabelValues() }

func (l *LBPools) metrics(cfg lbpool.Config, o outcome) {
	poolSize.Reset()
	poolUsed.Reset()
	for _, u := range o.usages {
		poolSize.WithLabelValues(u.Pool, u.Family).Set(u.Size)
		poolUsed.WithLabelValues(u.Pool, u.Family).Set(float64(u.Used))
	}
	var np, no int
	for _, v := range o.verdicts {
		if v.result.Pending != "" {
			np++
		}
		no += len(v.result.Orphaned)
	}
	pending().Set(float64(np))
	orphaned().Set(float64(no))
}
