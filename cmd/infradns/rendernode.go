package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/nodecfg"
)

// renderNode writes what one node installs under a root directory: "/" on
// the node itself, or a staging directory to copy from. Nothing is written
// unless every file renders and validates. Running it again after an edit
// of the cluster file is the way to change a node: it rewrites what
// changed, removes what the node's role no longer has, and leaves
// forward.conf to the dispatcher script that owns it after the first boot.
func renderNode(_ context.Context, args []string, out io.Writer) error {
	fs := flags("render-node", "-f CLUSTER.yaml -o ROOT [-role control-plane|worker|bootstrap|master] [-node NAME] [-dry-run] [-format files|machineconfig|butane]")
	load := nodeFlags(fs, "control-plane, worker or bootstrap")
	root := fs.String("o", "", "root directory to write under (/ on the node); with -format machineconfig or butane, the file to write (- for stdout)")
	dry := fs.Bool("dry-run", false, "print what would change as a unified diff; write nothing")
	format := fs.String("format", nodecfg.FormatFiles, "files (a tree under -o), machineconfig or butane (OpenShift: one MachineConfig per pool)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *root == "" || fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("render-node needs -f FILE and -o ROOT")
	}
	f, err := load()
	if err != nil {
		return err
	}
	v, err := f.Values()
	if err != nil {
		return err
	}
	if *format == nodecfg.FormatFiles && filepath.Clean(*root) == "/" {
		// Rendered on the node itself (a dry run too): its interface
		// and subnets are here to check.
		if err := checkLocalLink(f); err != nil {
			return err
		}
	}
	outs, err := nodecfg.Render(v)
	if err != nil {
		return err
	}
	switch *format {
	case nodecfg.FormatFiles:
	case nodecfg.FormatMachineConfig, nodecfg.FormatButane:
		return machineConfig(*format, f, *root, *dry, out) // machineconfig.go
	default:
		return fmt.Errorf("render-node: -format %q: want files, machineconfig or butane", *format)
	}
	changes, err := nodecfg.Plan(*root, outs)
	if err != nil {
		return err
	}
	if *dry {
		n := 0
		for _, c := range changes {
			if d := c.Diff(); d != "" {
				n++
				fmt.Fprint(out, d)
			}
		}
		fmt.Fprintf(out, "# dry run: %d of %d files would change; nothing written\n", n, len(changes))
		return nil
	}
	err = nodecfg.Install(changes, atomicfile.WriteIfChanged)
	for _, c := range changes {
		note := ""
		if c.Action == nodecfg.Keep {
			note = " (the dispatcher script's since the first boot)"
		}
		fmt.Fprintf(out, "%-9s %s%s\n", c.Action, c.Under, note)
	}
	return err
}
