package monitoring

import (
	"regexp"
	"slices"
	"strings"
)

// metricRE matches the metric names the rules and the dashboard use: ours
// and CoreDNS's.
var metricRE = regexp.MustCompile(`\b(?:coredns|infradns)_[a-z0-9_]+`)

// MetricNames are the metrics rules.yaml and dashboard.json use, sorted,
// each once, histogram suffixes cut (what a /metrics page declares).
func MetricNames() []string {
	var out []string
	for _, src := range [][]byte{Rules, Dashboard} {
		for _, m := range metricRE.FindAllString(string(src), -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if strings.HasSuffix(m, "_seconds"+suffix) {
					m = strings.TrimSuffix(m, suffix)
				}
			}
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
