package main

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
)

// withoutLine writes the example cluster file without its line of key.
func withoutLine(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, key+":") {
			out = append(out, l)
		}
	}
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := writeFile(p, strings.Join(out, "\n")); err != nil {
		t.Fatal(err)
	}
	return p
}

var priorityRE = regexp.MustCompile(`(?m)^\s*priority (\d+)$`)

// TestRenderPriorities: two control-plane nodes render at the priorities
// lbconfig gives them before the API (their addresses' rank among the
// apiServers), not both at 250: two backups at one priority time out in
// the same millisecond and both claim the VIP.
func TestRenderPriorities(t *testing.T) {
	m, err := readModel(example)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, n := range []struct{ node, ip string }{{"master-0", "198.51.100.11"}, {"master-1", "198.51.100.12"}} {
		var out bytes.Buffer
		h := filepath.Join(t.TempDir(), "haproxy.cfg")
		err := run(context.Background(), []string{"render", "-f", example, "-role", "control-plane", "-node", n.node, "-node-ip", n.ip, "-keepalived", "-", "-haproxy", h}, &out)
		if err != nil {
			t.Fatal(err)
		}
		ps := priorityRE.FindAllStringSubmatch(out.String(), -1)
		if len(ps) != 2 { // the API VIP's two families
			t.Fatalf("%s: want 2 instances:\n%s", n.node, out.String())
		}
		for _, p := range ps {
			if p[1] != ps[0][1] {
				t.Errorf("%s: instances at %s and %s", n.node, ps[0][1], p[1])
			}
		}
		got[n.node], _ = strconv.Atoi(ps[0][1])

		// What lbconfig computes on that node before the API: its model
		// with its own addresses, ranked by cluster.Assign.
		nm, err := m.WithNode(n.node, "ens3", []netip.Addr{netip.MustParseAddr(n.ip)})
		if err != nil {
			t.Fatal(err)
		}
		as, err := cluster.Assign(nm, cluster.Snapshot{})
		if err != nil || len(as) == 0 {
			t.Fatalf("Assign: %v %v", as, err)
		}
		if want := lb.RankPriority(as[0].Rank); got[n.node] != want {
			t.Errorf("%s: priority %d, lbconfig's %d", n.node, got[n.node], want)
		}
	}
	if got["master-0"] != 250 || got["master-1"] != 210 {
		t.Errorf("priorities %v, want master-0 250 and master-1 210", got)
	}
}

// TestRenderNeedsAPIServers: render and render-node refuse a control-plane
// (or bootstrap) node without apiServers with the one error.
func TestRenderNeedsAPIServers(t *testing.T) {
	f := withoutLine(t, "apiServers")
	for role, want := range map[string]string{
		"control-plane": f + ": apiServers: missing: a control-plane node's haproxy serves the API VIP before the API lists any apiserver (the first kubeadm init waits on it): list the control-plane nodes' addresses",
		"bootstrap":     f + ": apiServers: a bootstrap node has no API to list them: give at least one",
	} {
		for _, args := range [][]string{
			{"render", "-f", f, "-role", role, "-node", "master-0"},
			{"render-node", "-f", f, "-role", role, "-node", "master-0", "-o", t.TempDir()},
		} {
			err := run(context.Background(), args, &bytes.Buffer{})
			if err == nil || err.Error() != want {
				t.Errorf("%v: err = %v\nwant %s", args, err, want)
			}
		}
	}
	if err := run(context.Background(), []string{"render-node", "-f", f, "-role", "worker", "-node", "w", "-o", t.TempDir()}, &bytes.Buffer{}); err != nil {
		t.Errorf("worker: %v", err)
	}
}

// TestRoleMaster: -role master, OpenShift's word, is the control-plane role.
func TestRoleMaster(t *testing.T) {
	for _, args := range [][]string{
		{"render-node", "-f", example, "-role", "master", "-format", "machineconfig", "-o", "-"}, // the pool-wide MachineConfig: no -node
		{"render-node", "-f", example, "-role", "master", "-node", "master-0", "-o", t.TempDir()},
		{"render", "-f", example, "-role", "master", "-node", "master-0"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err != nil {
			t.Errorf("%v: %v", args, err)
			continue
		}
		if s := out.String(); !strings.Contains(s, "haproxy") {
			t.Errorf("%v: no haproxy, not the control-plane role:\n%.400s", args, s)
		}
	}
}

// TestRenderLocalLink: on the node itself (render-node -o /, a dry run too;
// render for this host) a missing interface or a VIP off its subnets is
// refused before anything is read or written; for a staging directory
// or another node, nothing is looked up.
func TestRenderLocalLink(t *testing.T) {
	saved := nodeInterfaces
	t.Cleanup(func() { nodeInterfaces = saved })
	host := func(ifaces map[string][]netip.Prefix) {
		nodeInterfaces = func() (map[string][]netip.Prefix, error) { return ifaces, nil }
	}
	me, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	me = strings.ToLower(me)
	missing := example + `:10: interface: "ens3": no such interface on this node (it has eth0, lo)`
	offLink := example + ":10: apiVIPs, interface: 192.0.2.5 is outside every subnet on ens3 (198.51.100.11/24, 2001:db8::11/64): keepalived would hold it where no neighbour looks for it"
	for _, tc := range []struct {
		name   string
		ifaces map[string][]netip.Prefix
		args   []string
		want   string
	}{
		{"render-node, no interface", map[string][]netip.Prefix{"lo": nil, "eth0": nil}, []string{"render-node", "-f", example, "-role", "control-plane", "-node", "master-0", "-o", "/", "-dry-run"}, missing},
		{"render-node, off the subnet", map[string][]netip.Prefix{"ens3": {netip.MustParsePrefix("198.51.100.11/24"), netip.MustParsePrefix("2001:db8::11/64")}},
			[]string{"render-node", "-f", example, "-role", "control-plane", "-node", "master-0", "-o", "/", "-dry-run"}, offLink},
		{"render for this host, no interface", map[string][]netip.Prefix{"lo": nil, "eth0": nil}, []string{"render", "-f", example, "-role", "control-plane", "-node", me}, missing},
		{"render for this host, off the subnet", map[string][]netip.Prefix{"ens3": {netip.MustParsePrefix("198.51.100.11/24"), netip.MustParsePrefix("2001:db8::11/64")}},
			[]string{"render", "-f", example}, offLink},
		// Not the node: nothing to look up.
		{"render-node to a staging directory", map[string][]netip.Prefix{"lo": nil}, []string{"render-node", "-f", example, "-role", "control-plane", "-node", "master-0", "-o", t.TempDir()}, ""},
		{"render for another node", map[string][]netip.Prefix{"lo": nil}, []string{"render", "-f", example, "-role", "control-plane", "-node", "master-0", "-node-ip", "198.51.100.11"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host(tc.ifaces)
			err := run(context.Background(), tc.args, &bytes.Buffer{})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("err =\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// TestScanNamesInterface: vrrp-scan on an interface the host lacks says
// which (the socket's error named none).
func TestScanNamesInterface(t *testing.T) {
	err := run(context.Background(), []string{"vrrp-scan", "-interface", "nosuch9", "-cluster", "ocp4", "-duration", "10ms"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), `"nosuch9": no such interface on this node (it has `) {
		t.Errorf("err = %v", err)
	}
}
