package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// nodeTarget is a Node whose metrics endpoints status asks.
type nodeTarget struct {
	Name string
	Addr netip.Addr
}

// nodeRow is one node as its metrics describe it.
type nodeRow struct {
	Node string `json:"node"`
	// LastGood is when lbconfig last had keepalived.conf and haproxy.cfg in
	// step with the cluster; zero when unknown.
	LastGood time.Time `json:"lastGood,omitzero"`
	// Rejected and ReloadFailures count renders the tools refused and
	// reloads that failed since lbconfig started.
	Rejected       int      `json:"rejected"`
	ReloadFailures int      `json:"reloadFailures"`
	Held           []string `json:"held"`
	// NamesMDNS and NamesAPI are the node names each source gives this
	// node's resolver; -1 when that source is off.
	NamesMDNS int    `json:"namesMDNS"`
	NamesAPI  int    `json:"namesAPI"`
	Error     string `json:"error,omitempty"`
}

// scrapeNodes asks each node's lbconfig and DNS metrics endpoints, a few
// at a time, 3 s each.
func scrapeNodes(ctx context.Context, targets []nodeTarget, lbPort, dnsPort int, now time.Time) []nodeRow {
	rows := make([]nodeRow, len(targets))
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 3 * time.Second}
	for i, t := range targets {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			rows[i] = nodeStatus(ctx, client, t, lbPort, dnsPort)
		})
	}
	wg.Wait()
	slices.SortFunc(rows, func(a, b nodeRow) int { return strings.Compare(a.Node, b.Node) })
	return rows
}

func nodeStatus(ctx context.Context, c *http.Client, t nodeTarget, lbPort, dnsPort int) nodeRow {
	r := nodeRow{Node: t.Name, NamesMDNS: -1, NamesAPI: -1}
	var errs []string
	lb, err := fetchMetrics(ctx, c, t.Addr, lbPort)
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, s := range lb {
		switch s.name {
		case "coredns_lbconfig_last_success_timestamp_seconds":
			if s.value > 0 {
				r.LastGood = time.Unix(0, int64(s.value*1e9))
			}
		case "coredns_lbconfig_validation_failures_total":
			r.Rejected += int(s.value)
		case "coredns_lbconfig_reloads_total":
			if s.labels["result"] == "failure" {
				r.ReloadFailures += int(s.value)
			}
		case "coredns_lbconfig_vip_held":
			if s.value == 1 {
				r.Held = append(r.Held, s.labels["vip"])
			}
		}
	}
	slices.Sort(r.Held)
	dnsm, err := fetchMetrics(ctx, c, t.Addr, dnsPort)
	if err != nil {
		errs = append(errs, err.Error())
	}
	for _, s := range dnsm {
		if s.name == "coredns_mdnsnodes_source_nodes" {
			switch s.labels["source"] {
			case "mdns":
				r.NamesMDNS = int(s.value)
			case "api":
				r.NamesAPI = int(s.value)
			}
		}
	}
	r.Error = strings.Join(errs, "; ")
	return r
}

type sample struct {
	name   string
	labels map[string]string
	value  float64
}

func fetchMetrics(ctx context.Context, c *http.Client, addr netip.Addr, port int) ([]sample, error) {
	url := "http://" + net.JoinHostPort(addr.String(), strconv.Itoa(port)) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (metricsAddress set on the node?)", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body), nil
}

// parseMetrics reads the samples of the Prometheus text format that status
// uses: name{labels} value, no timestamps, no escapes in label values
// (ours hold addresses and words).
func parseMetrics(r io.Reader) []sample {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			continue
		}
		s := sample{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(s.name, '{'); i >= 0 {
			for _, kv := range strings.Split(strings.TrimSuffix(s.name[i+1:], "}"), ",") {
				k, val, ok := strings.Cut(kv, "=")
				if ok {
					s.labels[k] = strings.Trim(val, `"`)
				}
			}
			s.name = s.name[:i]
		}
		out = append(out, s)
	}
	return out
}

func printNodes(out io.Writer, rows []nodeRow, now time.Time) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLAST GOOD CONFIG\tREJECTED\tRELOAD FAILURES\tHOLDS\tNAMES mDNS/API\tERROR")
	count := func(n int) string {
		if n < 0 {
			return "off"
		}
		return strconv.Itoa(n)
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s/%s\t%s\n", r.Node, ago(r.LastGood, now), r.Rejected, r.ReloadFailures,
			dash(strings.Join(r.Held, ",")), count(r.NamesMDNS), count(r.NamesAPI), dash(r.Error))
	}
	return tw.Flush()
}
