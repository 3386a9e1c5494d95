package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/nodecfg"
)

// uninstall removes what render-node and install put on a node, static
// pods first (keepalived hands its VIPs over as kubelet stops it), then
// kubelet pointed back at its own resolver before the file it reads goes,
// the resolver units stopped before theirs do, and what install recorded
// changing (its files, kubelet's flag, the sysctls it raised) undone.
// The mDNS key and the kubeconfig stay.
func uninstall(ctx context.Context, args []string, out io.Writer) error {
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
	n := newNode(*root, *dry, out)
	rec, err := n.record()
	if err != nil {
		return err
	}
	verb := "removed"
	if *dry {
		verb = "would remove"
	}
	remove := func(p string) error {
		path := n.under(p)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !*dry {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("uninstall: %w", err)
			}
		}
		fmt.Fprintf(out, "%-12s %s\n", verb, path)
		return nil
	}
	paths := nodecfg.UninstallPaths()
	// The static pods first.
	for _, p := range paths {
		if strings.HasPrefix(p, nodecfg.ManifestDir+"/") {
			if err := remove(p); err != nil {
				return err
			}
		}
	}
	// kubelet back to its own resolver before the file it reads goes: a
	// pod sandbox made while kubelet names a missing resolvConf fails.
	keepKubeletResolv := false
	if rec.KubeletEnv != "" && rec.KubeletEnvEdit != nil {
		env, err := atomicfile.ReadRegular(n.under(rec.KubeletEnv))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return fmt.Errorf("uninstall: %w", err)
		default:
			back := nodecfg.RemoveKubeletResolvConf(env, *rec.KubeletEnvEdit)
			switch {
			case len(back) == 0 && rec.KubeletEnvCreated:
				if err := remove(rec.KubeletEnv); err != nil {
					return err
				}
			case string(back) != string(env):
				mode := os.FileMode(0o644)
				if fi, err := os.Stat(n.under(rec.KubeletEnv)); err == nil {
					mode = fi.Mode().Perm()
				}
				if !*dry {
					if _, err := atomicfile.WriteIfChanged(n.under(rec.KubeletEnv), back, mode); err != nil {
						return fmt.Errorf("uninstall: %w", err)
					}
				}
				fmt.Fprintf(out, "%-12s --resolv-conf from %s\n", map[bool]string{true: "would take", false: "took"}[*dry], n.under(rec.KubeletEnv))
			}
			if n.systemd() {
				n.run(ctx, "kubelet reads its own resolvConf again", "systemctl", "try-restart", "kubelet.service")
			} else {
				keepKubeletResolv = true
			}
		}
	} else if cfg, err := os.ReadFile(n.under("/var/lib/kubelet/config.yaml")); err == nil && strings.Contains(string(cfg), nodecfg.KubeletResolv) {
		// Wired by hand (render-node, the guide's KubeletConfiguration).
		keepKubeletResolv = true
	}
	if keepKubeletResolv && n.exists(nodecfg.KubeletResolv) {
		fmt.Fprintf(out, "%-12s %s: kubelet still reads it; set its resolvConf back (/run/systemd/resolve/resolv.conf with systemd-resolved), restart kubelet, then remove the file\n", "kept", n.under(nodecfg.KubeletResolv))
	}
	// The units stopped before their files go.
	if (n.exists(nodecfg.IdentityPath) || n.exists(nodecfg.IdentityService)) && n.systemd() {
		n.run(ctx, "the identity units stop", "systemctl", "disable", "--now", "infradns-identity.path", "infradns-identity.timer", "infradns-identity.service")
	}
	unitsGone := false
	if n.exists(nodecfg.ResolverService) || n.exists(nodecfg.ResolverPath) {
		unitsGone = true
		if n.systemd() {
			n.run(ctx, "the resolver units stop", append([]string{"systemctl", "disable", "--now"}, resolverUnits...)...)
		}
	}
	resolvedDropIn := n.exists(nodecfg.ResolvedDropIn)
	for _, p := range paths {
		if strings.HasPrefix(p, nodecfg.ManifestDir+"/") || (keepKubeletResolv && p == nodecfg.KubeletResolv) {
			continue
		}
		if err := remove(p); err != nil {
			return err
		}
	}
	nmConf := n.exists(nodecfg.NMConf)
	unitsGone = unitsGone || slices.Contains(rec.Files, nodecfg.IdentityPath)
	for _, p := range rec.Files {
		if err := remove(p); err != nil {
			return err
		}
	}
	// The sysctls install raised, back while they still have its value.
	for _, s := range nodecfg.Sysctls() {
		prev, ok := rec.Sysctls[s[0]]
		if !ok || prev == "" || !n.live || readSysctl(s[0]) != s[1] {
			continue
		}
		if *dry {
			fmt.Fprintf(out, "%-12s %s = %s\n", "would set", s[0], prev)
			continue
		}
		if err := os.WriteFile(sysctlPath(s[0]), []byte(prev), 0o644); err != nil {
			return fmt.Errorf("uninstall: sysctl %s: %w", s[0], err)
		}
		fmt.Fprintf(out, "%-12s %s = %s (as before install)\n", "set", s[0], prev)
	}
	if err := remove(nodecfg.InstallRecord); err != nil {
		return err
	}
	for _, d := range nodecfg.UninstallDirs() {
		if !*dry {
			_ = os.Remove(n.under(d)) // only when empty: keys and anything else stay
		}
	}
	switch {
	case (unitsGone || resolvedDropIn) && n.systemd():
		n.run(ctx, "the units are gone", "systemctl", "daemon-reload")
		if resolvedDropIn {
			n.run(ctx, "resolved's drop-in is gone", "systemctl", "try-reload-or-restart", "systemd-resolved.service")
		}
	case unitsGone || resolvedDropIn:
		// systemd still holds the units, resolved the drop-in: say so
		// (the root may be a staging tree).
		fmt.Fprintln(out, "then run: systemctl daemon-reload && systemctl restart systemd-resolved   (the units and resolved's drop-in are gone)")
	}
	if nmConf && n.exists("/run/NetworkManager") {
		n.run(ctx, "NetworkManager manages /etc/resolv.conf again", "nmcli", "general", "reload")
	}
	resolvPath := n.under("/etc/resolv.conf")
	resolv, err := os.ReadFile(resolvPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return errors.Join(n.errs...)
		}
		return fmt.Errorf("uninstall: %w", err)
	}
	// The dispatcher put this node first and the API VIP second.
	restored, changed := nodecfg.RestoreResolv(resolv, f.Domain, append(localAddrs(), f.APIVIPs...))
	if changed {
		if !*dry {
			if _, err := atomicfile.WriteIfChanged(resolvPath, restored, 0o644); err != nil {
				return fmt.Errorf("uninstall: %w", err)
			}
		}
		fmt.Fprintf(out, "%-12s this node, the API VIP and %s from %s (NetworkManager or systemd-resolved may now manage it again)\n", map[bool]string{true: "would take", false: "took"}[*dry], f.Domain, resolvPath)
	}
	return errors.Join(n.errs...)
}
