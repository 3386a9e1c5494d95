package lb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/atomicfile"
)

type nopLog struct{ t *testing.T }

func (l nopLog) Infof(f string, v ...any)    { l.t.Logf("INFO "+f, v...) }
func (l nopLog) Warningf(f string, v ...any) { l.t.Logf("WARN "+f, v...) }
func (l nopLog) Errorf(f string, v ...any)   { l.t.Logf("ERROR "+f, v...) }

type countReload struct {
	n   int
	err error
}

func (r *countReload) Reload(context.Context) error { r.n++; return r.err }

// rejectValidator refuses haproxy configs holding a marker, like a tool would.
type rejectValidator struct{ marker string }

func (v rejectValidator) Validate(_ context.Context, k Kind, b []byte) error {
	if v.marker != "" && bytes.Contains(b, []byte(v.marker)) {
		return &ValidationError{Kind: k, Err: errors.New("exit status 1"), Output: "rejected"}
	}
	return nil
}

func newController(t *testing.T, v Validator) (*Controller, *countReload, *countReload, map[string]int) {
	dir := t.TempDir()
	kr, hr := &countReload{}, &countReload{}
	counts := map[string]int{}
	c := &Controller{
		Model:     config(false),
		Validator: v,
		Outputs: []Output{
			{Kind: Keepalived, Path: filepath.Join(dir, "keepalived.conf"), Reloader: kr},
			{Kind: HAProxyCfg, Path: filepath.Join(dir, "haproxy.cfg"), Reloader: hr},
		},
		Log: nopLog{t},
		Hooks: Hooks{
			Refused:  func(error) { counts["refused"]++ },
			Invalid:  func(Kind, error) { counts["invalid"]++ },
			Written:  func(Kind) { counts["written"]++ },
			Reloaded: func(_ Kind, err error) { counts["reloaded"]++ },
		},
	}
	return c, kr, hr, counts
}

func TestControllerApply(t *testing.T) {
	ctx := context.Background()
	c, kr, hr, counts := newController(t, rejectValidator{})
	if err := c.Apply(ctx, snap(3, false)); err != nil {
		t.Fatal(err)
	}
	if kr.n != 1 || hr.n != 1 || counts["written"] != 2 {
		t.Fatalf("First apply: reloads %d/%d, writes %d", kr.n, hr.n, counts["written"])
	}
	// Same state again: nothing written, nothing reloaded.
	if err := c.Apply(ctx, snap(3, false)); err != nil {
		t.Fatal(err)
	}
	if kr.n != 1 || hr.n != 1 || counts["written"] != 2 {
		t.Errorf("Unchanged apply: reloads %d/%d, writes %d", kr.n, hr.n, counts["written"])
	}

	// The API is lost: the snapshot is empty, the files stay.
	before := readFile(t, c.Outputs[1].Path)
	if err := c.Apply(ctx, Snapshot{}); err != nil {
		t.Fatal(err)
	}
	if counts["refused"] != 1 || readFile(t, c.Outputs[1].Path) != before {
		t.Errorf("Empty snapshot: refused %d, haproxy.cfg changed: %v", counts["refused"], readFile(t, c.Outputs[1].Path) != before)
	}

	// A reload fails: the error asks for a retry, and the retry reloads
	// although the file on disk is already current.
	hr.err = errors.New("master socket refused")
	if err := c.Apply(ctx, snap(2, false)); err == nil {
		t.Fatal("Expected the reload error")
	}
	hr.err = nil
	if err := c.Apply(ctx, snap(2, false)); err != nil {
		t.Fatal(err)
	}
	if hr.n != 3 {
		t.Errorf("haproxy reloads = %d, want 3 (first, failed, retried)", hr.n)
	}
	if err := c.Apply(ctx, snap(2, false)); err != nil || hr.n != 3 {
		t.Errorf("After the retry: %d reloads, err %v", hr.n, err)
	}
}

func TestControllerKeepsRejected(t *testing.T) {
	ctx := context.Background()
	c, _, hr, counts := newController(t, rejectValidator{marker: "198.51.100.14"})
	if err := c.Apply(ctx, snap(3, false)); err != nil {
		t.Fatal(err)
	}
	good := readFile(t, c.Outputs[1].Path)
	if err := c.Apply(ctx, snap(4, false)); err != nil {
		t.Fatal(err)
	}
	if counts["invalid"] != 1 || hr.n != 1 {
		t.Errorf("Invalid %d, haproxy reloads %d", counts["invalid"], hr.n)
	}
	if readFile(t, c.Outputs[1].Path) != good {
		t.Error("A rejected haproxy.cfg replaced the good one")
	}
	if !strings.Contains(readFile(t, c.Outputs[0].Path), "ocp4_api_v4") {
		t.Error("keepalived.conf missing")
	}
}

// TestControllerRealTools runs the pipeline with the real validators and a
// real command as the reload.
func TestControllerRealTools(t *testing.T) {
	tools := labTools(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "reloaded")
	c := &Controller{
		Model:     config(true),
		Validator: tools,
		Outputs: []Output{
			{Kind: Keepalived, Path: filepath.Join(dir, "keepalived.conf"), Reloader: Command{Argv: []string{"sh", "-c", "echo k >> " + marker}}},
			{Kind: HAProxyCfg, Path: filepath.Join(dir, "haproxy.cfg"), Reloader: Command{Argv: []string{"sh", "-c", "echo h >> " + marker}}},
		},
		Log: nopLog{t},
	}
	if err := c.Apply(context.Background(), snap(3, true)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, marker); got != "k\nh\n" {
		t.Errorf("Reload commands ran as %q", got)
	}
	if err := c.Apply(context.Background(), snap(3, true)); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, marker); got != "k\nh\n" {
		t.Errorf("Unchanged state reloaded again: %q", got)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestControllerGate holds keepalived back while the gate says no, keeps
// haproxy going, and asks for a retry.
func TestControllerGate(t *testing.T) {
	ctx := context.Background()
	c, kr, hr, _ := newController(t, rejectValidator{})
	held := errors.New("still listening")
	var planned []string
	c.Gate = func(k Kind, p Plan) error {
		if k != Keepalived {
			return nil
		}
		for _, in := range p.VRRPInstances() {
			planned = append(planned, fmt.Sprintf("%s/%d/%v", in.Name, in.VRID, in.VIPs))
		}
		return held
	}
	if err := c.Apply(ctx, snap(3, false)); !errors.Is(err, held) {
		t.Fatalf("Apply = %v, want the gate's error", err)
	}
	if _, err := os.Stat(c.Outputs[0].Path); err == nil || kr.n != 0 || hr.n != 1 {
		t.Errorf("keepalived written or reloaded while held (reloads %d/%d)", kr.n, hr.n)
	}
	if strings.Join(planned, " ") != "ocp4_api_v4/222/[192.0.2.5] ocp4_ingress_v4/61/[192.0.2.10]" {
		t.Errorf("Gate saw %v", planned)
	}
	c.Gate = nil
	if err := c.Apply(ctx, snap(3, false)); err != nil || kr.n != 1 {
		t.Errorf("After the gate opened: %v, keepalived reloads %d", err, kr.n)
	}
}

// TestControllerReloadsAReplacedFile: a write that replaced the file but
// could not sync its directory reports the change with the error; the
// daemon is reloaded all the same (the defect: a file reported "not
// written" was never reloaded, since the retry found equal bytes).
func TestControllerReloadsAReplacedFile(t *testing.T) {
	c, kr, hr, counts := newController(t, rejectValidator{})
	failed := false
	writeFile = func(path string, data []byte, mode fs.FileMode) (bool, error) {
		changed, err := atomicfile.WriteIfChanged(path, data, mode)
		if changed && !failed && strings.HasSuffix(path, "haproxy.cfg") {
			failed = true
			return true, errors.New("injected: replaced, but sync directory failed")
		}
		return changed, err
	}
	t.Cleanup(func() { writeFile = atomicfile.WriteIfChanged })
	ctx := context.Background()
	if err := c.Apply(ctx, snap(3, false)); err == nil {
		t.Fatal("Apply hid the durability error")
	}
	if hr.n != 1 || kr.n != 1 || counts["written"] != 2 {
		t.Errorf("reloads keepalived %d haproxy %d, written %d: want the replaced file reloaded", kr.n, hr.n, counts["written"])
	}
	if err := c.Apply(ctx, snap(3, false)); err != nil || hr.n != 1 {
		t.Errorf("retry: %v, haproxy reloads %d, want no second reload", err, hr.n)
	}
}

// TestControllerReloadsWhatIsOnDisk: what a daemon was told lives in
// memory, and a process that wrote a file and died before its reload
// leaves the next one equal bytes on disk. The first apply of a process
// (a fresh Loaded) reloads an unchanged file once; a Corefile reload (the
// same Loaded) reloads nothing that is known to run already.
func TestControllerReloadsWhatIsOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	kr, hr := &countReload{}, &countReload{}
	outs := []Output{
		{Kind: Keepalived, Path: filepath.Join(dir, "keepalived.conf"), Reloader: kr},
		{Kind: HAProxyCfg, Path: filepath.Join(dir, "haproxy.cfg"), Reloader: hr},
	}
	process := func(l *Loaded) *Controller {
		return &Controller{Model: config(false), Validator: rejectValidator{}, Outputs: outs, Log: nopLog{t}, Loaded: l}
	}

	// The first process writes both files; haproxy's reload fails, and the
	// process dies before a retry.
	hr.err = errors.New("injected: master socket refused")
	if err := process(nil).Apply(ctx, snap(3, false)); err == nil {
		t.Fatal("Apply hid the failed reload")
	}
	hr.err = nil
	kr.n, hr.n = 0, 0

	// The next process renders the same bytes: nothing to write, and still
	// both daemons are reloaded once, and only once.
	shared := &Loaded{}
	c := process(shared)
	for range 2 {
		if err := c.Apply(ctx, snap(3, false)); err != nil {
			t.Fatal(err)
		}
	}
	if kr.n != 1 || hr.n != 1 {
		t.Errorf("after a restart with the files on disk: reloads keepalived %d haproxy %d, want 1 and 1", kr.n, hr.n)
	}
	// A Corefile reload: a new controller, the same process.
	if err := process(shared).Apply(ctx, snap(3, false)); err != nil || kr.n != 1 || hr.n != 1 {
		t.Errorf("after a Corefile reload: %v, reloads keepalived %d haproxy %d, want no new one", err, kr.n, hr.n)
	}

	// At start, a daemon not running yet reads the file when it starts:
	// no retry asked for. After a write it is retried (the daemon may have
	// read the old file an instant before).
	notRunning := fmt.Errorf("reload: %w: no pid file", ErrNotRunning)
	kr.err, hr.err = notRunning, notRunning
	c = process(nil)
	if err := c.Apply(ctx, snap(3, false)); err != nil {
		t.Errorf("restart before the daemons run: %v, want success", err)
	}
	if err := c.Apply(ctx, snap(3, false)); err != nil || kr.n != 2 || hr.n != 2 {
		t.Errorf("then: %v, reloads keepalived %d haproxy %d, want 2 and 2 (tried once at start)", err, kr.n, hr.n)
	}
	if err := c.Apply(ctx, snap(2, false)); err == nil {
		t.Error("a written file whose daemon is not running: no retry asked for")
	}
	if err := c.Apply(ctx, snap(2, false)); err == nil || hr.n != 4 {
		t.Errorf("retry: %v, haproxy reloads %d, want the error again and 4", err, hr.n)
	}
}
