package apiint

import (
	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/authority"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// requestCount counts the queries apiint handled, by what it did with them.
var requestCount = authority.NewCounter(promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: plugin.Namespace,
	Subsystem: pluginName,
	Name:      "requests_total",
	Help:      "Counter of queries handled by apiint, by result (answer, nodata, nxdomain, fallthrough, passed).",
}, []string{"server", "result"}))
