package lb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClusterFileBootstrap renders testdata/bootstrap.yaml, which states the
// same cluster as the "bootstrap" golden case, and expects the same bytes.
func TestClusterFileBootstrap(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "bootstrap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s, c, err := ParseClusterFile(b)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Desired(s, c)
	if err != nil {
		t.Fatal(err)
	}
	k, err := RenderKeepalived(p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := RenderHAProxy(p)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "bootstrap.keepalived.conf.golden", k)
	golden(t, "bootstrap.haproxy.cfg.golden", h)
}

func TestClusterFileErrors(t *testing.T) {
	tests := []struct{ name, yaml, want string }{
		{"unknown key", "cluster: a\napiVIP: [192.0.2.5]\n", "unknown field"},
		{"bad vip", "cluster: a\napiVIPs: [192.0.2.500]\n", "apiVIPs"},
		{"bad backend", "cluster: a\nbackends: [master-0]\n", "backends"},
		{"bad interval", "cluster: a\nadvertInterval: fast\n", "advertInterval"},
		{"no cluster", "apiVIPs: [192.0.2.5]\n", "cluster name is empty"},
		{"equal ids", "cluster: a\nrouterIDs: {api: 5, ingress: 5}\n", "routerIDs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := ParseClusterFile([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
