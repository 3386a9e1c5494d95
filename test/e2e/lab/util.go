package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Module is the module path RepoRoot looks for.
const Module = "github.com/infradns/infradns"

// RepoRoot finds the infradns checkout by walking up from the working
// directory (a test runs in its package directory) to the go.mod of Module;
// nested modules on the way are skipped.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if modulePath(filepath.Join(dir, "go.mod")) == Module {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", Module)
		}
		dir = parent
	}
}

func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Path returns a file of the checkout (RepoRoot joined with rel), failing t when
// it does not exist.
func Path(t testing.TB, rel string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	p := filepath.Join(root, rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("lab: %v", err)
	}
	return p
}

// Binary returns the path of bin/NAME in the checkout, failing t with a hint
// when it has not been built.
func Binary(t testing.TB, name string) string {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	p := filepath.Join(root, "bin", name)
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		t.Fatalf("lab: %s is missing or not executable: run make build first", p)
	}
	return p
}

// Poll calls cond every interval until it returns nil, ctx ends or timeout
// passes, and returns nil or the last error of cond.
func Poll(ctx context.Context, timeout, interval time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not true after %v: %w", timeout, last)
		case <-time.After(interval):
		}
	}
}

// Eventually is Poll that fails t with what and the last error.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() error) {
	t.Helper()
	if err := Poll(context.Background(), timeout, interval, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// ErrNotYet is a convenient error for Poll conditions that are simply false.
var ErrNotYet = errors.New("not yet")
