package lbservices

import (
	"strings"

	"github.com/coredns/coredns/plugin"

	"github.com/infradns/infradns/internal/authority"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	// requestCount counts the queries lbservices handled, by what it did with them.
	requestCount = authority.NewCounter(promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "requests_total",
		Help:      "Counter of queries handled by lbservices, by result (answer, nodata, nxdomain, fallthrough, passed, notready).",
	}, []string{"server", "result"}))
	// services is the number of Services with a name.
	services = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "services",
		Help:      "Gauge of the Services of type LoadBalancer with an address that lbservices serves, by zones.",
	}, []string{"zones"})
	// refusedHostnames is what an owner of a Service must look at: a
	// hostname annotation that is not served.
	refusedHostnames = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "hostnames_refused",
		Help:      "Gauge of the infradns.io/hostname annotations lbservices does not serve (taken, or below another namespace), by zones.",
	}, []string{"zones"})
)

func (l *LBServices) zonesLabel() string { return strings.Join(l.Zones, ",") }
