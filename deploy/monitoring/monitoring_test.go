package monitoring

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite prometheusrule.yaml from rules.yaml")

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatalf("promtool not found (Debian package prometheus; run hack/install-deps.sh as root): %v", err)
	}
	out, err := exec.Command("promtool", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestRulesLoad: the real promtool accepts both rule files.
func TestRulesLoad(t *testing.T) {
	out := promtool(t, "check", "rules", "rules.yaml")
	t.Log(out)
	// The PrometheusRule's spec is a rule file too.
	var pr struct {
		Spec map[string]any `json:"spec"`
	}
	b, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &pr); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(path, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "rules", path)
}

// TestRulesFire: `promtool test rules` fires every alert on synthetic
// series and none on a healthy cluster; every alert of rules.yaml has a
// case that fires it.
func TestRulesFire(t *testing.T) {
	out := promtool(t, "test", "rules", "rules_test.yaml")
	t.Log(out)
	tests, err := os.ReadFile("rules_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range alerts(t) {
		if !regexp.MustCompile(`alertname: ` + a + `\n\s+exp_alerts:\n`).Match(tests) {
			t.Errorf("rules_test.yaml never fires %s", a)
		}
	}
}

func alerts(t *testing.T) []string {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(Rules, &f); err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../../docs/operator-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Alert)
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", r.Alert)
			}
			anchor := "alert-" + strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != "https://github.com/infradns/infradns/blob/main/docs/operator-guide.md#"+anchor {
				t.Errorf("%s: runbook_url %q", r.Alert, r.Annotations["runbook_url"])
			}
			if !bytes.Contains(guide, []byte(`<a id="`+anchor+`"></a>`)) {
				t.Errorf("%s: docs/operator-guide.md has no runbook anchor %q", r.Alert, anchor)
			}
		}
	}
	return out
}

// TestPrometheusRule: prometheusrule.yaml carries exactly rules.yaml's
// groups (go test -update rewrites it).
func TestPrometheusRule(t *testing.T) {
	var rules map[string]any
	if err := yaml.Unmarshal(Rules, &rules); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata": map[string]any{
			"name":      "infradns",
			"namespace": "infradns",
			"labels":    map[string]any{"app.kubernetes.io/name": "infradns"},
		},
		"spec": rules,
	}
	if *update {
		b, err := yaml.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		head := "# Generated from rules.yaml by `go test ./deploy/monitoring -update`: edit rules.yaml.\n# For the Prometheus operator: kubectl apply -f deploy/monitoring/prometheusrule.yaml\n"
		if err := os.WriteFile("prometheusrule.yaml", append([]byte(head), b...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile("prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := yaml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	// Through JSON, so both sides hold the same types.
	norm := func(v any) any {
		j, _ := json.Marshal(v)
		var out any
		_ = json.Unmarshal(j, &out)
		return out
	}
	if !reflect.DeepEqual(norm(got), norm(want)) {
		t.Error("prometheusrule.yaml differs from rules.yaml (go test ./deploy/monitoring -update rewrites it)")
	}
}

// TestScrapeConfig: the scrape jobs load in the real promtool. Debian's
// Prometheus is built without Kubernetes discovery, so the jobs are checked
// with a static target in its place; the relabelling is what matters.
func TestScrapeConfig(t *testing.T) {
	b, err := os.ReadFile("scrape-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "  kubernetes_sd_configs:\n  - role: node\n", "  static_configs:\n  - targets: ['198.51.100.11:10250']\n")
	if strings.Count(text, "static_configs") != 3 {
		t.Fatalf("expected three jobs with kubernetes_sd_configs role node:\n%s", b)
	}
	path := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(path, []byte("global: {}\n"+text), 0o644); err != nil {
		t.Fatal(err)
	}
	promtool(t, "check", "config", path)
	for _, port := range []string{"9153", "9154", "9155"} {
		if !strings.Contains(string(b), "'${1}:"+port+"'") {
			t.Errorf("no job for port %s", port)
		}
	}
}

// TestDashboard: the dashboard is JSON with panels whose queries name only
// infradns and CoreDNS metrics (TestMonitoringMetricsExist in test/e2e
// checks the binaries export each).
func TestDashboard(t *testing.T) {
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(Dashboard, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || len(d.Panels) < 8 {
		t.Fatalf("dashboard uid %q with %d panels", d.UID, len(d.Panels))
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	if got := MetricNames(); len(got) < 15 {
		t.Errorf("metric names used: %v", got)
	}
}
