package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
)

// Kind names one of the two files.
type Kind string

const (
	Keepalived Kind = "keepalived"
	HAProxyCfg Kind = "haproxy"
)

// Validator judges a rendered file before it may replace the live one.
type Validator interface {
	Validate(ctx context.Context, k Kind, data []byte) error
}

// Tools validates with the real programs: `keepalived -t -f FILE` (it exits
// non-zero on warnings too: 5 for a v2 sub-second interval or a truncated
// password, and it checks that the interface exists, so it must run in the
// node's network namespace) and `haproxy -c -dW -f FILE` (-dW: warnings fail
// as well, for the same strictness).
type Tools struct {
	// Keepalived and HAProxy are the binaries; empty means look up in $PATH.
	Keepalived string
	HAProxy    string
	// Wrap prefixes both commands, e.g. ip netns exec NS, or a chroot.
	Wrap []string
	// Dir holds the temporary files; empty means os.TempDir().
	Dir string
	// Timeout bounds one check; zero means 10 s.
	Timeout time.Duration
}

// Validate writes data to a temporary file and runs the tool on it.
func (t Tools) Validate(ctx context.Context, k Kind, data []byte) error {
	var args []string
	switch k {
	case Keepalived:
		args = []string{orDefault(t.Keepalived, "keepalived"), "-t", "-f"}
	case HAProxyCfg:
		args = []string{orDefault(t.HAProxy, "haproxy"), "-c", "-dW", "-f"}
	default:
		return fmt.Errorf("validate: unknown kind %q", k)
	}
	f, err := os.CreateTemp(t.Dir, "infradns-"+string(k)+"-*.conf")
	if err != nil {
		return fmt.Errorf("validate %s: %w", k, err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("validate %s: %w", k, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("validate %s: %w", k, err)
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := append(append(append([]string{}, t.Wrap...), args...), f.Name())
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			// keepalived 2.2.7 -t never returns on some malformed input
			// ("track_file {{"): a hang is a rejection too.
			err = fmt.Errorf("no verdict within %s: %w", timeout, ctx.Err())
		}
		return &ValidationError{Kind: k, Err: err, Output: strings.TrimSpace(strings.ReplaceAll(out.String(), f.Name(), string(k)))}
	}
	return nil
}

// ValidationError is a rejection by the tool, with what it said.
type ValidationError struct {
	Kind   Kind
	Err    error
	Output string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("%s rejected the configuration (%v): %s", e.Kind, e.Err, firstLines(e.Output, 5))
}

func (e *ValidationError) Unwrap() error { return e.Err }

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, " | ")
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Install puts data at path if it differs from what is there and the
// validator accepts it, and reports whether the file changed. A rejected or
// failed write leaves the old file in place. New files get mode 0644; an
// existing file keeps its mode. Only a regular file is replaced: anything
// else at path (a device, a pipe, a symlink) is refused before validating.
func Install(ctx context.Context, v Validator, k Kind, path string, data []byte) (bool, error) {
	old, err := atomicfile.ReadRegular(path)
	switch {
	case err == nil && bytes.Equal(old, data):
		return false, nil // validating costs ~0.1 s; an unchanged file needs none
	case errors.Is(err, atomicfile.ErrNotRegular):
		return false, fmt.Errorf("write %w", err)
	}
	if err := v.Validate(ctx, k, data); err != nil {
		return false, err
	}
	return writeFile(path, data, 0o644)
}

// writeFile is replaced by tests to fail after the file was replaced.
var writeFile = atomicfile.WriteIfChanged
