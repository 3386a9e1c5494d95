package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/nodecfg"
)

// uninstall removes what render-node installed under a root, static pods
// first (keepalived hands its VIPs over as kubelet stops it), and takes
// this node out of resolv.conf. The mDNS key and the kubeconfig stay.
func uninstall(_ context.Context, args []string, out io.Writer) error {
	fl := flags("uninstall", "-f CLUSTER.yaml -o ROOT [-dry-run]")
	file := fl.String("f", "", "the cluster file the node was rendered from (its domain)")
	root := fl.String("o", "", "root the node was rendered under (/ on the node)")
	dry := fl.Bool("dry-run", false, "say what would be removed; change nothing")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *root == "" || *file == "" || fl.NArg() > 0 {
		fl.Usage()
		return errors.New("uninstall needs -f FILE and -o ROOT")
	}
	f, err := readClusterFile(*file)
	if err != nil {
		return err
	}
	verb := "removed"
	if *dry {
		verb = "would remove"
	}
	resolved := false
	for _, p := range nodecfg.UninstallPaths() {
		path := nodecfg.Under(*root, p)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		resolved = resolved || p == nodecfg.ResolverService || p == nodecfg.ResolvedDropIn
		if !*dry {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("uninstall: %w", err)
			}
		}
		fmt.Fprintf(out, "%-12s %s\n", verb, path)
	}
	for _, d := range nodecfg.UninstallDirs() {
		if !*dry {
			_ = os.Remove(nodecfg.Under(*root, d)) // only when empty: keys and anything else stay
		}
	}
	if resolved {
		// systemd still holds the units, resolved the drop-in: say so
		// rather than run systemctl (the root may be a staging tree).
		fmt.Fprintln(out, "then run: systemctl daemon-reload && systemctl restart systemd-resolved   (the units and resolved's drop-in are gone)")
	}
	resolvPath := nodecfg.Under(*root, "/etc/resolv.conf")
	resolv, err := os.ReadFile(resolvPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("uninstall: %w", err)
	}
	// The dispatcher put this node first and the API VIP second.
	restored, changed := nodecfg.RestoreResolv(resolv, f.Domain, append(localAddrs(), f.APIVIPs...))
	if !changed {
		return nil
	}
	if !*dry {
		if _, err := atomicfile.WriteIfChanged(resolvPath, restored, 0o644); err != nil {
			return fmt.Errorf("uninstall: %w", err)
		}
	}
	fmt.Fprintf(out, "%-12s this node, the API VIP and %s from %s (NetworkManager or systemd-resolved may now manage it again)\n", map[bool]string{true: "would take", false: "took"}[*dry], f.Domain, resolvPath)
	return nil
}
