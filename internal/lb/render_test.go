package lb

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestRenderGolden(t *testing.T) {
	for _, tc := range goldenCases() {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Desired(tc.s, tc.c)
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
			golden(t, tc.name+".keepalived.conf.golden", k)
			golden(t, tc.name+".haproxy.cfg.golden", h)

			// Deterministic: shuffled input order renders the same bytes.
			s := tc.s
			s.Nodes = reversed(s.Nodes)
			s.APIServers = reversed(s.APIServers)
			s.IngressNodes = reversed(s.IngressNodes)
			s.Services = reversed(s.Services)
			p2, err := Desired(s, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			k2, _ := RenderKeepalived(p2)
			h2, _ := RenderHAProxy(p2)
			if !bytes.Equal(k, k2) || !bytes.Equal(h, h2) {
				t.Error("Input order changed the output")
			}
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func reversed[T any](in []T) []T {
	out := make([]T, len(in))
	for i, v := range in {
		out[len(in)-1-i] = v
	}
	return out
}

func TestUserTemplates(t *testing.T) {
	tpl, err := ParseTemplates("vrrp {{.Cluster}} {{range .Instances}}{{.VRID}}{{end}}\n", "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Desired(snap(3, false), config(false))
	if err != nil {
		t.Fatal(err)
	}
	k, err := tpl.Keepalived(p)
	if err != nil || string(k) != "vrrp ocp4 22261\n" {
		t.Errorf("User keepalived template = %q, %v", k, err)
	}
	h, err := tpl.HAProxy(p)
	if err != nil || !strings.Contains(string(h), "backend ocp4_api") {
		t.Errorf("Built-in haproxy template not kept: %v", err)
	}
	if _, err := ParseTemplates("{{.Cluster", ""); err == nil {
		t.Error("Expected a parse error")
	}
	bad, err := ParseTemplates("{{.NoSuchField}}", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Keepalived(p); err == nil {
		t.Error("Expected an error for a field the plan does not have")
	}
}
