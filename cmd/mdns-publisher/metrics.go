package main

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	events *prometheus.CounterVec
}

// newMetrics registers the publisher's metrics on its own registry.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "infradns",
			Subsystem: "mdns_publisher",
			Name:      "events_total",
			Help:      "Counter of publisher events: probe, announcement, goodbye, response, conflict, address_change, goodbye_defended.",
		}, []string{"event"}),
	}
	reg.MustRegister(m.events)
	for _, e := range []string{"probe", "announcement", "goodbye", "response", "conflict", "address_change", "goodbye_defended"} {
		m.events.WithLabelValues(e)
	}
	return m
}
