package nodecfg

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
)

func actions(cs []Change) map[string]Action {
	out := map[string]Action{}
	for _, c := range cs {
		out[c.Path] = c.Action
	}
	return out
}

func plan(t *testing.T, root string, f File) []Change {
	t.Helper()
	cs, err := Plan(root, renderList(t, f))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestInstallAgain: render-node run again after an edit rewrites only what
// changed, removes what the role no longer has, and never overwrites the
// dispatcher's forward.conf.
func TestInstallAgain(t *testing.T) {
	root := t.TempDir()
	f := exampleFile(t)
	f.Role, f.Node = ControlPlane, "master-0"
	haproxy := ManifestDir + "/infradns-haproxy.yaml"

	first := plan(t, root, f)
	for p, a := range actions(first) {
		if a != Create {
			t.Errorf("first install: %s %s, want created", p, a)
		}
	}
	if err := Install(first, atomicfile.WriteIfChanged); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, DispatcherPath))
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("dispatcher script: %v %v", fi, err)
	}

	// The same again: nothing to do.
	for p, a := range actions(plan(t, root, f)) {
		want := Unchanged
		if p == ForwardConf {
			want = Keep
		}
		if a != want {
			t.Errorf("second install: %s %s, want %s", p, a, want)
		}
	}

	// The dispatcher rewrote forward.conf from the node's resolvers; the
	// node becomes a worker with another upstream in the file.
	fwd := filepath.Join(root, ForwardConf)
	if err := os.WriteFile(fwd, []byte("forward . 203.0.113.53\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.Role = Worker
	f.Upstreams = ips("198.51.100.99")
	cs := plan(t, root, f)
	got := actions(cs)
	for p, want := range map[string]Action{
		haproxy:     Remove,
		ForwardConf: Keep,
		LBCorefile:  Update,
		ManifestDir + "/infradns-mdns-publisher.yaml": Unchanged,
		ManifestDir + "/infradns-keepalived.yaml":     Update,
	} {
		if got[p] != want {
			t.Errorf("as a worker: %s %s, want %s", p, got[p], want)
		}
	}
	for _, c := range cs {
		if c.Action == Remove && !strings.Contains(c.Diff(), "+++ /dev/null") {
			t.Errorf("removal diff:\n%s", c.Diff())
		}
		if c.Path == LBCorefile && (!strings.Contains(c.Diff(), "-        haproxy /etc/infradns/lb/haproxy.cfg") || !strings.Contains(c.Diff(), "+        health-check api none")) {
			t.Errorf("lbconfig Corefile diff:\n%s", c.Diff())
		}
	}
	if err := Install(cs, atomicfile.WriteIfChanged); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, haproxy)); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", haproxy, err)
	}
	if b, _ := os.ReadFile(fwd); string(b) != "forward . 203.0.113.53\n" {
		t.Errorf("forward.conf overwritten: %q", b)
	}
}

// TestPlanWritesNothing: a plan (what -dry-run prints) reads the tree and
// leaves it as it was, and its diff shows a new file whole.
func TestPlanWritesNothing(t *testing.T) {
	root := t.TempDir()
	f := exampleFile(t)
	f.Role = Bootstrap
	cs := plan(t, root, f)
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a plan wrote %d entries", len(entries))
	}
	for _, c := range cs {
		if c.Path == Corefile && (!strings.HasPrefix(c.Diff(), "--- /dev/null\n+++ "+filepath.Join(root, Corefile)) || !strings.Contains(c.Diff(), "+    apiint 192.0.2.5 2001:db8::5 {")) {
			t.Errorf("Corefile diff:\n%s", c.Diff())
		}
	}
}

// TestPlanRefusesNonRegular: a pipe (or device, or symlink) where
// render-node writes a file is refused by the plan, not read (a pipe would
// block -dry-run forever) nor replaced.
func TestPlanRefusesNonRegular(t *testing.T) {
	root := t.TempDir()
	f := exampleFile(t)
	f.Role = Bootstrap
	p := filepath.Join(root, Corefile)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := Plan(root, renderList(t, f))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, atomicfile.ErrNotRegular) || !strings.Contains(err.Error(), p+" is a named pipe") {
			t.Errorf("Plan = %v, want %s refused as a named pipe", err, p)
		}
	case <-time.After(10 * time.Second):
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
		<-done
		t.Error("Plan hung reading a named pipe")
	}
}

// TestInstallCopy: an output copied from a file (install's own binary) is
// planned and installed as one with its data, and is never read whole
// into the change.
func TestInstallCopy(t *testing.T) {
	root, src := t.TempDir(), filepath.Join(t.TempDir(), "infradns")
	setSrc := func(content string) {
		if err := os.WriteFile(src, []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	outs := []Output{{Path: BinaryPath, Mode: 0o755, From: src}}
	step := func(name string, want Action, wantSize int64) {
		t.Helper()
		cs, err := Plan(root, outs)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(cs) != 1 || cs[0].Action != want || cs[0].Size != wantSize || cs[0].Old != nil || cs[0].New != nil {
			t.Fatalf("%s: %+v, want %s, %d bytes, no contents", name, cs, want, wantSize)
		}
		if err := Install(cs, func(string, []byte, os.FileMode) (bool, error) {
			return false, errors.New("a copy went through write")
		}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	check := func(content string) {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(root, BinaryPath))
		fi, serr := os.Stat(filepath.Join(root, BinaryPath))
		if err != nil || serr != nil || string(b) != content || fi.Mode().Perm() != 0o755 {
			t.Fatalf("%s: %q %v %v, want %q mode 0755", BinaryPath, b, fi, err, content)
		}
	}

	setSrc("version one\n")
	step("first", Create, 12)
	check("version one\n")
	step("again", Unchanged, 12)
	setSrc("version two\n") // the same size: the digest tells
	step("same size, other bytes", Update, 12)
	check("version two\n")
	if err := os.Chmod(filepath.Join(root, BinaryPath), 0o700); err != nil {
		t.Fatal(err)
	}
	step("other mode", Update, 12)
	check("version two\n")
	step("settled", Unchanged, 12)

	c := Change{Action: Update, Path: BinaryPath, Under: "/x" + BinaryPath, From: src, Size: 12}
	if d := c.Diff(); !strings.Contains(d, "copy of "+src+" (12 bytes)") {
		t.Errorf("diff of a copy: %q", d)
	}
	os.Remove(src)
	if _, err := Plan(root, outs); err == nil {
		t.Error("Plan with a missing source: no error")
	}
}
