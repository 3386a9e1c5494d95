package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/nodecfg"
)

// TestUninstall renders a control-plane node under a root, adds what the
// dispatcher script and the administrator would, and uninstalls: every file
// render-node and the dispatcher wrote is gone, the key and kubeconfig stay,
// and resolv.conf no longer names the cluster domain first.
func TestUninstall(t *testing.T) {
	root := t.TempDir()
	if err := run(context.Background(), []string{"render-node", "-f", example, "-role", "control-plane", "-o", root}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]string{
		"/etc/infradns/lb/keepalived.conf":    "# lbconfig's\n",
		"/etc/infradns/mdns.key":              "0123456789abcdef0123\n",
		"/etc/kubernetes/infradns/kubeconfig": "apiVersion: v1\n",
		// The dispatcher's file: search and nameserver 127.0.0.1 first (a
		// local address on every host), the API VIP, then the upstream, and
		// its timeout options after the source's.
		"/etc/resolv.conf": "search ocp4.example.com example.net\nnameserver 127.0.0.1\nnameserver 192.0.2.5\nnameserver 198.51.100.53\noptions edns0\noptions timeout:1 attempts:2\n",
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var dry bytes.Buffer
	if err := run(context.Background(), []string{"uninstall", "-f", example, "-o", root, "-dry-run"}, &dry); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, nodecfg.Corefile)); err != nil {
		t.Fatalf("-dry-run removed the Corefile: %v", err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"uninstall", "-f", example, "-o", root}, &out); err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "removed") != strings.Count(dry.String(), "would remove") || !strings.HasPrefix(out.String(), "removed      "+filepath.Join(root, nodecfg.ManifestDir, "infradns-keepalived.yaml")) {
		t.Errorf("uninstall said:\n%s\ndry run said:\n%s (keepalived's manifest must go first)", out.String(), dry.String())
	}
	for _, p := range nodecfg.UninstallPaths() {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s still there", p)
		}
	}
	for _, p := range []string{"/etc/infradns/mdns.key", "/etc/kubernetes/infradns/kubeconfig"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s removed: the administrator's, it stays", p)
		}
	}
	b, err := os.ReadFile(filepath.Join(root, "/etc/resolv.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "search example.net\nnameserver 198.51.100.53\noptions edns0\n"; string(b) != want {
		t.Errorf("resolv.conf:\n%s\nwant:\n%s", b, want)
	}
}

// TestUninstallResolved: in systemd-resolved mode uninstall also removes
// what `systemctl enable` made of the units, and says what systemd must
// be told.
func TestUninstallResolved(t *testing.T) {
	dir := t.TempDir()
	cluster := filepath.Join(dir, "cluster.yaml")
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cluster, append(b, []byte("resolver: systemd-resolved\nlisten: [ens3, lo]\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	if err := run(context.Background(), []string{"render-node", "-f", cluster, "-role", "worker", "-o", root}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	// systemctl enable infradns-resolver.path infradns-resolver.service
	for want, unit := range map[string]string{nodecfg.ResolverServiceWant: nodecfg.ResolverService, nodecfg.ResolverPathWant: nodecfg.ResolverPath} {
		p := filepath.Join(root, want)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(unit, p); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"uninstall", "-f", cluster, "-o", root}, &out); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{nodecfg.ResolverServiceWant, nodecfg.ResolverPathWant, nodecfg.ResolverService, nodecfg.ResolverPath, nodecfg.ResolverScript} {
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s still there", p)
		}
	}
	if !strings.Contains(out.String(), "systemctl daemon-reload && systemctl restart systemd-resolved") {
		t.Errorf("uninstall did not say what systemd must be told:\n%s", out.String())
	}
}
