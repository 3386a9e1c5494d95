package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/kube"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func statusLease(name, group, family, vip, holder string, since, renewed time.Time, transitions int32) coordinationv1.Lease {
	secs := int32(30)
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{kube.LabelCluster: "ocp4", kube.LabelGroup: group, kube.LabelFamily: family},
			Annotations: map[string]string{kube.AnnotationVIP: vip}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, LeaseTransitions: &transitions,
			AcquireTime: &metav1.MicroTime{Time: since}, RenewTime: &metav1.MicroTime{Time: renewed}},
	}
}

// TestStatusRows: a Lease renewed within its duration is HELD, one older is
// STALE whatever holder it still names, and a VIP of the cluster file with
// no Lease is NONE; rows come api first, then the ingress groups in order.
func TestStatusRows(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	m, err := readModel(example)
	if err != nil {
		t.Fatal(err)
	}
	leases := []coordinationv1.Lease{
		statusLease("ocp4-ingress-vip-v4", "ingress", "v4", "192.0.2.10", "worker-1", now.Add(-time.Hour), now.Add(-45*time.Second), 2),
		statusLease("ocp4-api-vip-v4", "api", "v4", "192.0.2.5", "master-0", now.Add(-3*time.Minute), now.Add(-4*time.Second), 0),
	}
	rows := vipRows(leases, m, now)
	var got []string
	for _, r := range rows {
		got = append(got, strings.Join([]string{r.Group, r.Family, r.VIP, r.Holder, r.State}, " "))
	}
	want := []string{
		"api v4 192.0.2.5 master-0 HELD",
		"api v6 2001:db8::5  NONE",
		"ingress v4 192.0.2.10 worker-1 STALE",
		"ingress v6 2001:db8::10  NONE",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var table bytes.Buffer
	if err := printRows(&table, rows, "table", now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "CLUSTER") {
		t.Fatalf("table:\n%s", table.String())
	}
	for _, w := range []string{"master-0", "HELD", "3m0s ago", "4s ago", "STALE", "45s ago", "NONE"} {
		if !strings.Contains(table.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, table.String())
		}
	}

	var js bytes.Buffer
	if err := printRows(&js, rows, "json", now); err != nil {
		t.Fatal(err)
	}
	var decoded struct{ VIPs []vipRow }
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatalf("json: %v\n%s", err, js.String())
	}
	if len(decoded.VIPs) != 4 || decoded.VIPs[0].Holder != "master-0" || !decoded.VIPs[0].Since.Equal(now.Add(-3*time.Minute)) {
		t.Errorf("json rows %+v", decoded.VIPs)
	}
	var y bytes.Buffer
	if err := printRows(&y, rows, "yaml", now); err != nil || !strings.Contains(y.String(), "holder: master-0") {
		t.Errorf("yaml (%v):\n%s", err, y.String())
	}
}

func TestGroupOrder(t *testing.T) {
	got := []string{groupKey("api"), groupKey("ingress"), groupKey("ingress-2"), groupKey("ingress-10")}
	for i := 1; i < len(got); i++ {
		if got[i-1] >= got[i] {
			t.Errorf("order %v", got)
		}
	}
}

func TestStatusFlags(t *testing.T) {
	for _, args := range [][]string{{"-o", "xml"}, {"-n", "Bad_NS"}, {"extra"}, {"-cluster", "-x"}} {
		if err := run(t.Context(), append([]string{"status"}, args...), &bytes.Buffer{}); err == nil {
			t.Errorf("status %v: no error", args)
		}
	}
}

// TestStatusNodes asks a node's metrics endpoints over HTTP (an httptest
// server standing in for both pods) and reads what status prints of them;
// an unreachable node is a row with its error, not a failure.
func TestStatusNodes(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `# HELP coredns_lbconfig_last_success_timestamp_seconds x
# TYPE coredns_lbconfig_last_success_timestamp_seconds gauge
coredns_lbconfig_last_success_timestamp_seconds %d
coredns_lbconfig_validation_failures_total{file="haproxy"} 2
coredns_lbconfig_validation_failures_total{file="keepalived"} 0
coredns_lbconfig_reloads_total{file="haproxy",result="failure"} 1
coredns_lbconfig_reloads_total{file="haproxy",result="success"} 9
coredns_lbconfig_vip_held{group="api",vip="192.0.2.5"} 1
coredns_lbconfig_vip_held{group="ingress",vip="192.0.2.10"} 0
coredns_mdnsnodes_source_nodes{source="mdns",zones="ocp4.example.com."} 5
coredns_mdnsnodes_source_nodes{source="api",zones="ocp4.example.com."} 6
`, now.Add(-42*time.Second).Unix())
	}))
	defer srv.Close()
	ap := netip.MustParseAddrPort(srv.Listener.Addr().String())
	closed := httptest.NewServer(http.NotFoundHandler())
	deadPort := netip.MustParseAddrPort(closed.Listener.Addr().String()).Port()
	closed.Close()
	rows := scrapeNodes(context.Background(), []nodeTarget{{"master-0", ap.Addr()}}, int(ap.Port()), int(ap.Port()), now)
	r := rows[0]
	if !r.LastGood.Equal(now.Add(-42*time.Second)) || r.Rejected != 2 || r.ReloadFailures != 1 || len(r.Held) != 1 || r.Held[0] != "192.0.2.5" ||
		r.NamesMDNS != 5 || r.NamesAPI != 6 || r.Error != "" {
		t.Errorf("row %+v", r)
	}
	dead := scrapeNodes(context.Background(), []nodeTarget{{"worker-9", ap.Addr()}}, int(deadPort), int(deadPort), now)[0]
	if dead.Error == "" || dead.NamesMDNS != -1 {
		t.Errorf("unreachable node: %+v", dead)
	}
	var out bytes.Buffer
	if err := printStatus(&out, nil, append(rows, dead), nil, nil, "table", now); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"master-0", "42s ago", "192.0.2.5", "5/6", "worker-9", "off/off", "metricsAddress"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("table lacks %q:\n%s", w, out.String())
		}
	}
}
