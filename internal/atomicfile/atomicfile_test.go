package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestWriteIfChanged(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "haproxy.cfg")

	wrote, err := WriteIfChanged(p, []byte("one\n"), 0o640)
	if err != nil || !wrote {
		t.Fatalf("First write: wrote=%v err=%v", wrote, err)
	}
	assertFile(t, p, "one\n", 0o640)

	// Unchanged: no write, so the mtime (and the inode) stay.
	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, past, past); err != nil {
		t.Fatal(err)
	}
	before := stat(t, p)
	wrote, err = WriteIfChanged(p, []byte("one\n"), 0o600)
	if err != nil || wrote {
		t.Fatalf("Same content: wrote=%v err=%v", wrote, err)
	}
	after := stat(t, p)
	if !after.ModTime().Equal(past) || !os.SameFile(before, after) {
		t.Errorf("Unchanged content touched the file: mtime %v, want %v", after.ModTime(), past)
	}

	// Changed: replaced, and the existing file's mode wins over the argument.
	if err := os.Chmod(p, 0o604); err != nil {
		t.Fatal(err)
	}
	wrote, err = WriteIfChanged(p, []byte("two\n"), 0o600)
	if err != nil || !wrote {
		t.Fatalf("Changed content: wrote=%v err=%v", wrote, err)
	}
	assertFile(t, p, "two\n", 0o604)
	if os.SameFile(before, stat(t, p)) {
		t.Error("Changed content was written in place, not renamed over")
	}
	assertNoTemp(t, dir, 1)
}

func TestWriteIfChangedFailureKeepsOld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keepalived.conf")
	if err := os.WriteFile(p, []byte("good\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The last step fails after the temp file is written and synced.
	rename = func(string, string) error { return errors.New("injected rename failure") }
	t.Cleanup(func() { rename = os.Rename })
	if _, err := WriteIfChanged(p, []byte("bad\n"), 0o644); err == nil {
		t.Error("Expected the injected error")
	}
	assertFile(t, p, "good\n", 0o644)
	assertNoTemp(t, dir, 1)
	rename = os.Rename

	// A real failure: a directory holds the target's name.
	p = filepath.Join(dir, "cfg")
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteIfChanged(p, []byte("bad\n"), 0o644); err == nil {
		t.Error("Expected an error replacing a directory")
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		t.Errorf("Target changed after a failed write: %v %v", fi, err)
	}
	assertNoTemp(t, dir, 2)
}

// TestWriteIfChangedReportsReplaced: when the rename succeeded but the
// directory cannot be synced, the file did change and the call says so
// with the error; a caller that reloads on a change must not lose it.
func TestWriteIfChangedReportsReplaced(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	openDir = func(string) (*os.File, error) { return nil, errors.New("injected open failure") }
	t.Cleanup(func() { openDir = os.Open })
	wrote, err := WriteIfChanged(p, []byte("new\n"), 0o644)
	if err == nil || !wrote {
		t.Fatalf("wrote=%v err=%v, want true and the error", wrote, err)
	}
	assertFile(t, p, "new\n", 0o644)
	assertNoTemp(t, dir, 1)
}

func assertFile(t *testing.T, p, want string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("%s = %q, want %q", p, b, want)
	}
	if m := stat(t, p).Mode().Perm(); m != mode {
		t.Errorf("%s mode = %v, want %v", p, m, mode)
	}
}

func assertNoTemp(t *testing.T, dir string, want int) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != want {
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		t.Errorf("%s holds %v, want %d entries (a temp file left behind?)", dir, names, want)
	}
}

func stat(t *testing.T, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
