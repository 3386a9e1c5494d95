package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVRIDs(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"vr-ids", "oc2-yw674"}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "APIVirtualRouterID: 1\nIngressVirtualRouterID: 223\n"; out.String() != want {
		t.Errorf("Output = %q, want %q", out.String(), want)
	}
	if err := run(context.Background(), []string{"vr-ids"}, &out); err == nil {
		t.Error("Expected an error without a cluster name")
	}
}

func TestRender(t *testing.T) {
	dir := t.TempDir()
	k, h := filepath.Join(dir, "keepalived.conf"), filepath.Join(dir, "haproxy.cfg")
	err := run(context.Background(), []string{"render", "-f", "../../internal/lb/testdata/bootstrap.yaml", "-keepalived", k, "-haproxy", h}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for file, golden := range map[string]string{k: "bootstrap.keepalived.conf.golden", h: "bootstrap.haproxy.cfg.golden"} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("../../internal/lb/testdata", golden))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s", file, golden)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"render", "-f", "../../internal/lb/testdata/bootstrap.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "vrrp_instance ocp4_api_v4") || !strings.Contains(out.String(), "backend ocp4_api") {
		t.Errorf("Stdout lacks one of the two files:\n%s", out.String())
	}
}

func TestScanFlags(t *testing.T) {
	if err := run(context.Background(), []string{"vrrp-scan", "-cluster", "ocp4"}, &bytes.Buffer{}); err == nil {
		t.Error("Expected an error without -interface")
	}
	if err := run(context.Background(), []string{"nosuch"}, &bytes.Buffer{}); err == nil {
		t.Error("Expected an error for an unknown command")
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

func TestRenderNode(t *testing.T) {
	root := t.TempDir()
	args := []string{"render-node", "-f", "../../deploy/cluster.example.yaml", "-role", "worker", "-node", "worker-0", "-o", root}
	// The example lists apiServers, which a worker must not have.
	var out bytes.Buffer
	err := run(context.Background(), args, &out)
	if err == nil || !strings.Contains(err.Error(), "apiServers: a worker runs no haproxy") {
		t.Fatalf("error %v, want the worker's apiServers refused", err)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a refused render wrote %d entries", len(entries))
	}

	args[4] = "control-plane"
	out.Reset()
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"written   /etc/kubernetes/manifests/infradns-haproxy.yaml", "written   /etc/infradns/Corefile"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	core, err := os.ReadFile(filepath.Join(root, "etc/infradns/Corefile"))
	if err != nil || !strings.Contains(string(core), "node worker-0") {
		t.Fatalf("Corefile (%v):\n%s", err, core)
	}
	out.Reset()
	if err := run(context.Background(), args, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "written") {
		t.Errorf("a second render rewrote files:\n%s", out.String())
	}
	if err := run(context.Background(), []string{"render-node", "-f", "../../deploy/cluster.example.yaml"}, &out); err == nil {
		t.Error("render-node without -o accepted")
	}
}
