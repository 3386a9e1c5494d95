package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/nodecfg"
)

// machineConfig is render-node -format machineconfig|butane: the pool's
// MachineConfig (or Butane config), rendered from the cluster file alone
// (nodecfg.PoolConfig refuses -node and anything else that is one node's),
// written to path, or to out for "-". With dry, nothing is written: out
// gets what writing would change (a unified diff of the file, and which
// node files it carries).
func machineConfig(format string, f nodecfg.File, path string, dry bool, out io.Writer) error {
	p, err := nodecfg.PoolConfig(f, format)
	if err != nil {
		return fmt.Errorf("render-node: %w", err)
	}
	if path == "-" {
		// Standard output is what was asked for, dry run or not.
		_, err := out.Write(p.Data)
		return err
	}
	what := fmt.Sprintf("%s %s for the %s pool: %s; forward.conf stays the dispatcher script's", format, p.Name, p.Pool, strings.Join(p.Files, " "))
	if dry {
		c, err := planFile(path, p.Data)
		if err != nil {
			return fmt.Errorf("render-node: %w", err)
		}
		if _, err := fmt.Fprint(out, c.Diff()); err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "# dry run: %s would be %s (%s); nothing written\n", path, c.Action, what)
		return err
	}
	changed, err := atomicfile.WriteIfChanged(path, p.Data, 0o644)
	if err != nil {
		return fmt.Errorf("render-node: %w", err)
	}
	verb := "wrote"
	if !changed {
		verb = "unchanged"
	}
	_, err = fmt.Fprintf(out, "%s %s (%s)\n", verb, path, what)
	return err
}

// planFile says what writing data to path would do, reading only: a
// regular file or nothing is there (a device, pipe or symlink is refused,
// as WriteIfChanged would).
func planFile(path string, data []byte) (nodecfg.Change, error) {
	c := nodecfg.Change{Path: path, Under: path, Mode: 0o644, New: data}
	old, err := atomicfile.ReadRegular(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.Action = nodecfg.Create
	case err != nil:
		return c, err
	case string(old) == string(data):
		c.Action, c.Old = nodecfg.Unchanged, old
	default:
		c.Action, c.Old = nodecfg.Update, old
	}
	return c, nil
}
