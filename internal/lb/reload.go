package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Reloader makes a running keepalived or haproxy read its new file.
type Reloader interface {
	Reload(ctx context.Context) error
}

// ErrNotRunning is wrapped by a reload that found no daemon to tell: no pid
// file or no such process, no master socket or nobody listening on it. Under
// kubelet the pods start in any order, so lbconfig often writes before
// keepalived or haproxy runs; that is no failure (the daemon reads the file
// when it starts), but the reload is retried, since a daemon that read the
// old file an instant before may not have opened its socket yet.
var ErrNotRunning = errors.New("not running")

// notRunning wraps err with ErrNotRunning when it says the daemon is absent.
func notRunning(err error) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	return err
}

// MasterSocket sends "reload" to haproxy's master CLI (haproxy -W -S PATH).
// The master answers only after the client half-closes, and haproxy 2.6
// answers nothing: success is the command being read.
type MasterSocket struct {
	Path string
}

// masterBusy bounds how long Reload waits out a master that is re-executing
// itself (haproxy 2.6 takes up to ~150 ms on an idle machine, more than a
// second on a loaded one): it refuses connections, or resets those queued on
// its old socket, without reading the command.
const masterBusy = 3 * time.Second

// Reload sends the command and waits for the master to close the connection.
// A master in the middle of a reload is retried, not reported: lbconfig
// writes and reloads again as soon as a change follows the last one.
func (m MasterSocket) Reload(ctx context.Context) error {
	until := time.Now().Add(masterBusy)
	for {
		err := m.reload(ctx)
		if err == nil || !m.busy(err) || time.Now().After(until) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// busy says whether err is what a re-executing master gives: a reset or
// closed connection, or a refused one while its socket file is there.
func (m MasterSocket) busy(err error) bool {
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		_, serr := os.Stat(m.Path)
		return serr == nil
	}
	return false
}

func (m MasterSocket) reload(ctx context.Context) error {
	out, err := m.exchange(ctx, "reload", 10*time.Second)
	if err != nil {
		return fmt.Errorf("reload: haproxy master socket: %w", err)
	}
	// haproxy ≥ 2.7 reports the outcome; 2.6 says nothing.
	if bytes.Contains(out, []byte("Success=0")) || bytes.Contains(out, []byte("Unknown command")) {
		return fmt.Errorf("reload: haproxy master: %s", bytes.TrimSpace(out))
	}
	return nil
}

// exchange sends one line to the master CLI, half-closes (the master
// answers only then) and reads the answer to the end, within limit or
// ctx's deadline, whichever comes first.
func (m MasterSocket) exchange(ctx context.Context, line string, limit time.Duration) ([]byte, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", m.Path)
	if err != nil {
		return nil, notRunning(err)
	}
	defer c.Close()
	deadline := time.Now().Add(limit)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return nil, err
	}
	if uc, ok := c.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	return io.ReadAll(c)
}

// Command runs a user command (the reload option); a non-zero exit fails.
type Command struct {
	Argv    []string
	Timeout time.Duration
}

// Reload runs the command with a timeout (30 s unless set).
func (c Command) Reload(ctx context.Context) error {
	if len(c.Argv) == 0 {
		return fmt.Errorf("reload: empty command")
	}
	t := c.Timeout
	if t == 0 {
		t = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.Argv[0], c.Argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("reload: %s: %w: %s", strings.Join(c.Argv, " "), err, firstLines(strings.TrimSpace(string(out)), 3))
	}
	return nil
}
