package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestWriteIfChangedRefusesNonRegular: a target that exists and is not a
// regular file is refused and left as it was. Before, `infradns render
// -haproxy /dev/null` as root renamed a regular file over /dev/null, and
// -keepalived /dev/stdout into a pipe hung reading the old content. The
// nodes here are in a temporary directory (a twin of /dev/null made with
// mknod), so a regression cannot break the machine's own.
func TestWriteIfChangedRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatalf("mknod (the test needs root): %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("target\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		typ  fs.FileMode
		want string
	}{
		{null, fs.ModeDevice | fs.ModeCharDevice, "is a character device"},
		{fifo, fs.ModeNamedPipe, "is a named pipe"},
		{link, fs.ModeSymlink, "is a symlink"},
	} {
		done := make(chan error, 1)
		go func() {
			_, err := WriteIfChanged(tc.path, []byte("new\n"), 0o644)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			// Blocked opening the pipe for reading: give it a writer so
			// the goroutine ends, and fail.
			if w, err := os.OpenFile(tc.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close()
			}
			<-done
			t.Errorf("%s: WriteIfChanged hung", tc.path)
			continue
		}
		if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrNotRegular (%q)", tc.path, err, tc.want)
		}
		fi, lerr := os.Lstat(tc.path)
		if lerr != nil || fi.Mode().Type() != tc.typ {
			t.Errorf("%s: now %v (%v), want it left a %v", tc.path, fi.Mode(), lerr, tc.typ)
		}
	}
	assertFile(t, target, "target\n", 0o644)
	assertNoTemp(t, dir, 4)
	if err := CheckTarget(null); !errors.Is(err, ErrNotRegular) {
		t.Errorf("CheckTarget(device) = %v", err)
	}
	if err := CheckTarget(target); err != nil {
		t.Errorf("CheckTarget(regular file) = %v", err)
	}
	if err := CheckTarget(filepath.Join(dir, "new")); err != nil {
		t.Errorf("CheckTarget(missing) = %v", err)
	}
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

// TestSameContent: equal sizes are not enough (the digest decides), and
// anything but two regular files is an error, never a verdict.
func TestSameContent(t *testing.T) {
	dir := t.TempDir()
	// Larger than io.Copy's buffer, so the digest is fed more than once.
	big := strings.Repeat("infradns\n", 20000)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a", big)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, b string
		want    bool
		wantErr error
	}{
		{"same bytes", write("same", big), true, nil},
		{"same size, last byte differs", write("flipped", big[:len(big)-1]+"X"), false, nil},
		{"longer", write("longer", big+"x"), false, nil},
		{"empty", write("empty", ""), false, nil},
		{"missing", filepath.Join(dir, "missing"), false, fs.ErrNotExist},
		{"symlink to the same file", link, false, ErrNotRegular},
	} {
		got, err := SameContent(a, tc.b)
		if got != tc.want || (tc.wantErr == nil) != (err == nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
			t.Errorf("%s: %v, %v; want %v, %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestCopyIfChanged: as WriteIfChanged, with the content streamed from a
// file: created with mode, left alone (same inode, same mtime) when equal,
// replaced when not, even at the same size.
func TestCopyIfChanged(t *testing.T) {
	dir, srcDir := t.TempDir(), t.TempDir()
	src := filepath.Join(srcDir, "infradns")
	p := filepath.Join(dir, "infradns")
	setSrc := func(content string) {
		if err := os.WriteFile(src, []byte(content), 0o700); err != nil {
			t.Fatal(err)
		}
	}

	setSrc("binary one\n")
	wrote, err := CopyIfChanged(p, src, 0o755)
	if err != nil || !wrote {
		t.Fatalf("first copy: wrote=%v err=%v", wrote, err)
	}
	assertFile(t, p, "binary one\n", 0o755)

	past := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(p, past, past); err != nil {
		t.Fatal(err)
	}
	before := stat(t, p)
	if wrote, err := CopyIfChanged(p, src, 0o755); err != nil || wrote {
		t.Fatalf("same content: wrote=%v err=%v", wrote, err)
	}
	if after := stat(t, p); !after.ModTime().Equal(past) || !os.SameFile(before, after) {
		t.Errorf("same content touched the file: mtime %v, want %v", after.ModTime(), past)
	}

	setSrc("binary two\n") // the same size: only the digest tells them apart
	if wrote, err := CopyIfChanged(p, src, 0o755); err != nil || !wrote {
		t.Fatalf("same size, other content: wrote=%v err=%v", wrote, err)
	}
	assertFile(t, p, "binary two\n", 0o755)
	if os.SameFile(before, stat(t, p)) {
		t.Error("changed content was written in place, not renamed over")
	}
	assertNoTemp(t, dir, 1)

	// The last step fails: the old copy stays, no temp file is left.
	setSrc("binary three, longer\n")
	rename = func(string, string) error { return errors.New("injected rename failure") }
	t.Cleanup(func() { rename = os.Rename })
	if _, err := CopyIfChanged(p, src, 0o755); err == nil {
		t.Error("expected the injected error")
	}
	rename = os.Rename
	assertFile(t, p, "binary two\n", 0o755)
	assertNoTemp(t, dir, 1)

	// A symlink at the target is refused and left; so is a missing source.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyIfChanged(link, src, 0o755); !errors.Is(err, ErrNotRegular) {
		t.Errorf("symlink target: %v, want ErrNotRegular", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("symlink target: now %v (%v)", fi, err)
	}
	if _, err := CopyIfChanged(p, filepath.Join(srcDir, "missing"), 0o755); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing source: %v, want fs.ErrNotExist", err)
	}
	assertFile(t, p, "binary two\n", 0o755)
	assertNoTemp(t, dir, 2)
}
