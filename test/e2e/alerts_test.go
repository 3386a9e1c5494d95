//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/deploy/monitoring"
	"github.com/infradns/infradns/test/e2e/lab"
)

// labPromPort is where the lab's Prometheus listens, inside its node.
const labPromPort = 19090

// labPrometheus is the real Prometheus (Debian's prometheus package, which
// hack/install-deps.sh installs for promtool) running in one lab node: it
// scrapes the lab's metrics endpoints and evaluates deploy/monitoring's
// rules.yaml, both every second, so the alerts are the rules' own
// expressions over the lab's own counters, rates and resets included.
type labPrometheus struct {
	node *lab.Node
	proc *lab.Process
}

// startLabPrometheus starts Prometheus on n, scraping targets (HOST:PORT).
// Start it before the daemons whose counters matter: a rate only sees what
// a counter did between two scrapes.
func startLabPrometheus(t *testing.T, n *lab.Node, targets ...string) *labPrometheus {
	t.Helper()
	if _, err := exec.LookPath("prometheus"); err != nil {
		t.Fatalf("prometheus not found (Debian package prometheus; run hack/install-deps.sh as root): %v", err)
	}
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
- job_name: infradns
  static_configs:
  - targets: [%s]
`, lab.Path(t, "deploy/monitoring/rules.yaml"), strings.Join(quoted, ", "))
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &labPrometheus{node: n}
	p.proc = n.Start("prometheus", []string{"prometheus", "--config.file=" + path,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--log.level=warn",
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", labPromPort)})
	lab.Eventually(t, 30*time.Second, 100*time.Millisecond, "prometheus ready", func() error {
		if p.proc.Exited() {
			return fmt.Errorf("prometheus exited: %v\n%s", p.proc.Err(), lab.Tail(p.proc.LogPath, 20))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := n.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/-/ready", labPromPort))
		return err
	})
	return p
}

// get fetches an API path of Prometheus and decodes its data into out.
func (p *labPrometheus) get(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := p.node.HTTPGet(ctx, fmt.Sprintf("http://127.0.0.1:%d%s", labPromPort, path))
	if err != nil {
		return err
	}
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return fmt.Errorf("%s: %w: %q", path, err, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", path, r.Error)
	}
	return json.Unmarshal(r.Data, out)
}

// query evaluates expr now and returns each series' labels and value.
func (p *labPrometheus) query(ctx context.Context, expr string) (map[string]float64, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(expr), &data); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: value %v", expr, r.Value)
		}
		out[fmt.Sprint(r.Metric)] = v
	}
	return out, nil
}

// waitUp waits until every target has been scraped successfully.
func (p *labPrometheus) waitUp(t *testing.T, ctx context.Context, targets int) {
	t.Helper()
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "every target scraped", func() error {
		up, err := p.query(ctx, "count(up == 1)")
		if err != nil {
			return err
		}
		if up["map[]"] != float64(targets) {
			return fmt.Errorf("up: %v of %d", up, targets)
		}
		return nil
	})
}

// promRule is a rule of /api/v1/rules.
type promRule struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	State     string `json:"state"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	Alerts    []struct {
		Labels map[string]string `json:"labels"`
		State  string            `json:"state"`
		Value  string            `json:"value"`
	} `json:"alerts"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

var ruleFileAlertRE = regexp.MustCompile(`(?m)^\s*- alert: `)

// checkQuiet fails the test unless, once every rule has been evaluated on
// samples scraped after now, no alert of rules.yaml is pending or firing.
// Pending (the expression is true, its `for` not yet over) counts: an
// expression that is true in a healthy lab fires in a healthy cluster once
// its `for` is over. It returns the rules, for the caller's own checks.
func (p *labPrometheus) checkQuiet(t *testing.T, ctx context.Context, what string) []promRule {
	t.Helper()
	// Two scrape intervals, then the next evaluation.
	since := time.Now().Add(2 * time.Second)
	var rules []promRule
	lab.Eventually(t, 30*time.Second, 250*time.Millisecond, what+": every rule evaluated on fresh samples", func() error {
		var data struct {
			Groups []struct {
				Rules []promRule `json:"rules"`
			} `json:"groups"`
		}
		if err := p.get(ctx, "/api/v1/rules", &data); err != nil {
			return err
		}
		rules = rules[:0]
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				if r.LastEvaluation.Before(since) {
					return fmt.Errorf("%s last evaluated %v", r.Name, r.LastEvaluation)
				}
				rules = append(rules, r)
			}
		}
		return nil
	})
	// The rules' own file loaded whole, and every expression evaluates:
	// an empty answer must mean "nothing to alert on", not "no rule".
	if want := len(ruleFileAlertRE.FindAll(monitoring.Rules, -1)); len(rules) != want {
		t.Errorf("%s: Prometheus evaluates %d rules, rules.yaml has %d alerts", what, len(rules), want)
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("%s: rule %s: health %q: %s", what, r.Name, r.Health, r.LastError)
		}
		if r.State != "inactive" {
			var alerts []string
			for _, a := range r.Alerts {
				alerts = append(alerts, fmt.Sprintf("%s %v = %s", a.State, a.Labels, a.Value))
			}
			t.Errorf("%s: alert %s is %s: %s", what, r.Name, r.State, strings.Join(alerts, "; "))
		}
	}
	return rules
}
