package secret

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, perm os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "s3cret\n", 0o600)
	if b, err := ReadFile(good, 80); err != nil || string(b) != "s3cret\n" {
		t.Errorf("ReadFile(0600) = %q, %v", b, err)
	}
	if b, err := ReadFile(write("ro", "s3cret", 0o400), 80); err != nil || string(b) != "s3cret" {
		t.Errorf("ReadFile(0400) = %q, %v", b, err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{write("group", "s3cret", 0o640), "is open to group or others (0640): it holds a secret: chmod 0600"},
		{write("world", "s3cret", 0o644), "is open to group or others (0644)"},
		{write("groupwrite", "s3cret", 0o620), "is open to group or others (0620)"},
		{write("long", strings.Repeat("x", 81), 0o600), "is longer than 80 bytes"},
		{filepath.Join(dir, "missing"), "no such file"},
		{dir, "is not a regular file"},
		{link, "is a symlink"},
		{fifo, "is not a regular file"},
	} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(tc.path, 80); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v, want %q", tc.path, err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s: the error quotes the secret: %v", tc.path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: ReadFile hung", tc.path)
		}
	}
	// Another user's file: its owner could read or change the secret.
	other := write("other", "s3cret", 0o600)
	if err := os.Chown(other, 1000, 1000); err != nil {
		t.Fatalf("chown (the test needs root): %v", err)
	}
	if _, err := ReadFile(other, 80); err == nil || !strings.Contains(err.Error(), "is owned by uid 1000: chown root") {
		t.Errorf("another user's file: %v", err)
	}
}
