package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a long-running command started in a node with Node.Start.
type Process struct {
	Name    string // as given to Start
	Node    *Node
	LogPath string // stdout and stderr

	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// StartOption changes how Node.Start runs a process.
type StartOption func(*startOpts)

type startOpts struct {
	env      []string
	dir      string
	hostname string
	hostSys  bool
}

// WithHostSys enters only the node's network namespace (nsenter) instead of
// `ip netns exec`, which also mounts the namespace's own /sys and so hides
// /sys/fs/cgroup from a container runtime or a kubelet started in the node.
func WithHostSys() StartOption { return func(o *startOpts) { o.hostSys = true } }

// WithEnv adds "KEY=value" entries to the process environment (which is the
// test binary's otherwise).
func WithEnv(kv ...string) StartOption {
	return func(o *startOpts) { o.env = append(o.env, kv...) }
}

// WithDir sets the working directory.
func WithDir(dir string) StartOption { return func(o *startOpts) { o.dir = dir } }

// WithHostname overrides the hostname the process sees (default: the node name).
func WithHostname(h string) StartOption { return func(o *startOpts) { o.hostname = h } }

// Start runs argv in the node, in its own UTS namespace whose hostname is the
// node's name, with stdout and stderr going to a log file in the lab's log
// directory. The process must stay in the foreground (no daemonizing): the lab
// stops it at teardown either way. It fails t if the process cannot start.
func (n *Node) Start(name string, argv []string, opts ...StartOption) *Process {
	t := n.lab.t
	t.Helper()
	p, err := n.StartErr(name, argv, opts...)
	if err != nil {
		t.Fatalf("lab: %v", err)
	}
	return p
}

// StartErr is Start returning an error instead of failing the test, for use
// outside the test goroutine.
func (n *Node) StartErr(name string, argv []string, opts ...StartOption) (*Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("start: empty command")
	}
	o := startOpts{hostname: n.Name}
	for _, f := range opts {
		f(&o)
	}
	l := n.lab
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errors.New("start: lab is closed")
	}
	logPath := filepath.Join(l.logDir, n.Name+"-"+name+".log")
	for i := 2; ; i++ {
		if _, err := os.Stat(logPath); errors.Is(err, os.ErrNotExist) {
			break
		}
		logPath = filepath.Join(l.logDir, fmt.Sprintf("%s-%s.%d.log", n.Name, name, i))
	}
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	l.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", name, n.Name, err)
	}
	defer f.Close()

	// ip netns exec, unshare and sh all exec in place, so the PID Start sees
	// is the PID of argv[0] and signals reach it directly.
	enter := []string{"ip", "netns", "exec", n.NS}
	if o.hostSys {
		enter = []string{"nsenter", "--net=/run/netns/" + n.NS, "--"}
	}
	args := append(append(enter, "unshare", "--uts", "--",
		"sh", "-c", `printf %s "$0" >/proc/sys/kernel/hostname && exec "$@"`, o.hostname), argv...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = o.dir
	if len(o.env) > 0 {
		cmd.Env = append(os.Environ(), o.env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s on %s: %w", name, n.Name, err)
	}
	p := &Process{Name: name, Node: n, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	l.mu.Lock()
	l.procs = append(l.procs, p)
	l.mu.Unlock()
	return p, nil
}

// Pid is the process ID (in the root PID namespace).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is how the process ended (nil for exit status 0); call after Done.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Signal sends sig to the process.
func (p *Process) Signal(sig syscall.Signal) error {
	if p.Exited() {
		return fmt.Errorf("lab: %s on %s already exited", p.Name, p.Node.Name)
	}
	return syscall.Kill(p.Pid(), sig)
}

// Wait waits for the process to exit or ctx to end, and returns how it ended.
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("lab: waiting for %s on %s: %w", p.Name, p.Node.Name, ctx.Err())
	}
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs the process group. It
// returns an error only when the process did not go away.
func (p *Process) Stop(grace time.Duration) error {
	if p.Exited() {
		return nil
	}
	_ = syscall.Kill(p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
	}
	return p.Kill()
}

// Kill SIGKILLs the process and its process group (a crash) and waits for it.
func (p *Process) Kill() error {
	if p.Exited() {
		return nil
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("lab: %s on %s survived SIGKILL", p.Name, p.Node.Name)
	}
}

// Log returns everything the process has written so far.
func (p *Process) Log() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}
