package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderNodeMachineConfigDryRun: -dry-run writes nothing, neither a
// new MachineConfig nor over an old one, and prints what writing would
// do: the diff, the path and the files it carries.
func TestRenderNodeMachineConfigDryRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "50-master-infradns.yaml")
	for _, format := range []string{"machineconfig", "butane"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"render-node", "-f", example, "-role", "control-plane", "-format", format, "-o", path, "-dry-run"}, &out)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("%s: the dry run wrote %d entries", format, len(entries))
		}
		s := out.String()
		if !strings.Contains(s, "--- /dev/null\n+++ "+path+"\n") || !strings.Contains(s, "+  name: 50-master-infradns\n") ||
			!strings.Contains(s, "# dry run: "+path+" would be created ("+format+" 50-master-infradns for the master pool: ") ||
			!strings.Contains(s, "/etc/infradns/lbconfig.Corefile") || !strings.HasSuffix(s, "; nothing written\n") {
			t.Errorf("%s dry run:\n%s", format, s)
		}
	}

	// Over an older file: a diff, and the file as it was.
	old := "# an older MachineConfig\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"render-node", "-f", example, "-role", "control-plane", "-format", "machineconfig", "-o", path, "-dry-run"}, &out); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != old {
		t.Errorf("the dry run changed %s (%v):\n%s", path, err, b)
	}
	if s := out.String(); !strings.Contains(s, "-# an older MachineConfig\n") || !strings.Contains(s, "would be updated") {
		t.Errorf("dry run over an older file:\n%s", s)
	}

	// Written for real, then a dry run again: nothing would change.
	if err := run(context.Background(), []string{"render-node", "-f", example, "-role", "control-plane", "-format", "machineconfig", "-o", path}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := run(context.Background(), []string{"render-node", "-f", example, "-role", "control-plane", "-format", "machineconfig", "-o", path, "-dry-run"}, &out); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.HasPrefix(s, "# dry run: "+path+" would be unchanged") {
		t.Errorf("dry run over the same file:\n%s", s)
	}
}

// TestRenderNodeMachineConfigRefusesNode: a MachineConfig is the pool's,
// so -node is refused (every master would act as that one), and nothing
// is written.
func TestRenderNodeMachineConfigRefusesNode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mc.yaml")
	for _, o := range []string{path, "-"} {
		var out bytes.Buffer
		err := run(context.Background(), []string{"render-node", "-f", example, "-role", "control-plane", "-node", "cp-0", "-format", "machineconfig", "-o", o}, &out)
		if err == nil || !strings.Contains(err.Error(), "-node cp-0: a MachineConfig applies to every node of its pool") {
			t.Errorf("-o %s: %v, want -node refused", o, err)
		}
		if out.Len() != 0 {
			t.Errorf("-o %s: printed %q", o, out.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused render wrote %d entries", len(entries))
	}
}
