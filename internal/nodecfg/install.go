package nodecfg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/infradns/infradns/internal/atomicfile"

	"github.com/pmezard/go-difflib/difflib"
)

// Action is what installing does to one file.
type Action string

const (
	Create    Action = "created"
	Update    Action = "updated"
	Unchanged Action = "unchanged"
	// Remove: a file an earlier render wrote that this role no longer has
	// (a control-plane node re-rendered as a worker keeps no haproxy pod).
	Remove Action = "removed"
	// Keep: a seed file the node already has (forward.conf, rewritten by
	// the dispatcher script from the node's real resolvers since).
	Keep Action = "kept"
)

// Change is one file an install touches or leaves, under its root.
type Change struct {
	Action Action
	// Path is the node's path (/etc/...); Under is where it is written
	// (Path below the root).
	Path, Under string
	Mode        fs.FileMode
	// Old and New are the contents; a copy (From set) has neither, its
	// bytes are never held in memory.
	Old, New []byte
	From     string
	// Size is the new content's length, New's or From's.
	Size int64
}

// managed are the files render-node may have written for some role: a
// file of this list that the current role does not render is removed.
// forward.conf is not one: once seeded, it is the dispatcher's.
func managed() []string {
	out := []string{Corefile, LBCorefile, ResolvEnv, DispatcherPath, ResolverScript, ResolverService, ResolverPath}
	for _, p := range []string{"coredns", "haproxy", "keepalived", "lbconfig", "mdns-publisher"} {
		out = append(out, ManifestDir+"/infradns-"+p+".yaml")
	}
	return out
}

// Plan compares outs with what root holds and says what installing them
// would do, file by file, in a stable order. It reads, never writes.
func Plan(root string, outs []Output) ([]Change, error) {
	var changes []Change
	want := map[string]bool{}
	for _, o := range outs {
		want[o.Path] = true
		c := Change{Path: o.Path, Under: under(root, o.Path), Mode: o.Mode, New: o.Data, From: o.From, Size: int64(len(o.Data))}
		if o.From != "" {
			if err := planCopy(&c); err != nil {
				return nil, err
			}
			changes = append(changes, c)
			continue
		}
		// A regular file or nothing: a device, pipe or symlink at a path
		// render-node writes is refused, never read (a pipe would block)
		// nor replaced.
		old, err := atomicfile.ReadRegular(c.Under)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			c.Action = Create
		case err != nil:
			return nil, err
		case o.Seed:
			c.Action, c.Old, c.New = Keep, old, old
		default:
			c.Old = old
			c.Action = Update
			if string(old) == string(o.Data) && modeIs(c.Under, o.Mode) {
				c.Action = Unchanged
			}
		}
		changes = append(changes, c)
	}
	for _, p := range managed() {
		if want[p] {
			continue
		}
		c := Change{Action: Remove, Path: p, Under: under(root, p)}
		old, err := atomicfile.ReadRegular(c.Under)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		c.Old = old
		changes = append(changes, c)
	}
	slices.SortFunc(changes, func(a, b Change) int { return strings.Compare(a.Path, b.Path) })
	return changes, nil
}

// planCopy is Plan for an output copied from a file.
func planCopy(c *Change) error {
	fi, err := os.Stat(c.From)
	if err != nil {
		return err
	}
	c.Size = fi.Size()
	// Lstat first: SameContent's fs.ErrNotExist could be From's too.
	if _, err := os.Lstat(c.Under); errors.Is(err, fs.ErrNotExist) {
		c.Action = Create
		return nil
	}
	same, err := atomicfile.SameContent(c.Under, c.From)
	if err != nil {
		return err
	}
	c.Action = Update
	if same && modeIs(c.Under, c.Mode) {
		c.Action = Unchanged
	}
	return nil
}

func under(root, p string) string { return filepath.Join(root, filepath.FromSlash(p)) }

func modeIs(path string, mode fs.FileMode) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().Perm() == mode.Perm()
}

// Install carries out a plan: each file written with write (atomically,
// keeping what did not change), each copy (From) by atomicfile.CopyIfChanged
// (streamed: write would take the whole file in memory), each removed file
// removed. It stops at the first error; what it did before is done.
func Install(changes []Change, write func(path string, data []byte, mode fs.FileMode) (bool, error)) error {
	for _, c := range changes {
		switch c.Action {
		case Create, Update:
			if err := os.MkdirAll(filepath.Dir(c.Under), 0o755); err != nil {
				return err
			}
			var err error
			if c.From != "" {
				_, err = atomicfile.CopyIfChanged(c.Under, c.From, c.Mode)
			} else {
				_, err = write(c.Under, c.New, c.Mode)
			}
			if err != nil {
				return err
			}
			if err := os.Chmod(c.Under, c.Mode); err != nil {
				return err
			}
		case Remove:
			if err := os.Remove(c.Under); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// Diff is a change as a unified diff (empty when the file stays as it is).
func (c Change) Diff() string {
	if c.Action == Unchanged || c.Action == Keep {
		return ""
	}
	from, to := c.Under, c.Under
	if c.Action == Create {
		from = "/dev/null"
	}
	if c.Action == Remove {
		to = "/dev/null"
	}
	if c.From != "" {
		// A binary: a diff of its bytes says nothing to a person.
		return fmt.Sprintf("--- %s\n+++ %s\ncopy of %s (%d bytes)\n", from, to, c.From, c.Size)
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(c.Old)), B: difflib.SplitLines(string(c.New)),
		FromFile: from, ToFile: to, Context: 3,
	})
	if err != nil {
		return fmt.Sprintf("(no diff: %v)\n", err)
	}
	if d == "" && c.Action == Update { // same bytes, other mode
		return fmt.Sprintf("--- %s\n+++ %s\nmode %#o\n", from, to, c.Mode.Perm())
	}
	return d
}
