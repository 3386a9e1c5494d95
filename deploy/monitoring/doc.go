// Package monitoring holds infradns' alerts (rules.yaml, and the same groups
// as a PrometheusRule in prometheusrule.yaml), a scrape configuration for
// the static pods (scrape-config.yaml) and a Grafana dashboard
// (dashboard.json). Its tests load the rules into the real promtool and
// fire each alert (rules_test.yaml); test/e2e's TestMonitoringMetricsExist
// scrapes running binaries for every metric the rules and the dashboard
// use.
package monitoring

import _ "embed"

// Rules and Dashboard are the files as shipped.
var (
	//go:embed rules.yaml
	Rules []byte
	//go:embed dashboard.json
	Dashboard []byte
)
