package lbconfig

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricNaming runs promlint over the plugin's metrics, as CoreDNS's
// own test does for its plugins.
func TestMetricNaming(t *testing.T) {
	// Vectors only show up once a series exists.
	validationFailures.WithLabelValues("keepalived")
	writesCount.WithLabelValues("keepalived")
	reloadsCount.WithLabelValues("keepalived", "success")
	vrrpConflicts.WithLabelValues("unknown-peer")
	vipHeld.WithLabelValues("192.0.2.5", "api")
	droppedValues.WithLabelValues("InternalIP", "not-unicast")
	splitBrainEvents.WithLabelValues("api", "stepped-down")
	splitSteppedDown.WithLabelValues("api")
	frozenServersDown.WithLabelValues("down")

	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "coredns_lbconfig_") {
			continue
		}
		n++
		problems, err := promlint.NewWithMetricFamilies([]*dto.MetricFamily{mf}).Lint()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
	if n != 16 {
		t.Errorf("Found %d lbconfig metrics, want 16", n)
	}
}
