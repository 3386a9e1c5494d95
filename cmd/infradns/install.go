package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
	"github.com/infradns/infradns/internal/nodecfg"
)

// The units install enables in systemd-resolved mode.
var resolverUnits = []string{"infradns-resolver.path", "infradns-resolver.service"}

// node is the host install and uninstall change: files under root, and,
// when root is "/" (live), the commands and sysctls of this host.
type node struct {
	root string
	live bool
	dry  bool
	out  io.Writer
	// errs are the commands that failed: reported, and the command fails
	// at the end, after everything else was done.
	errs []error
}

func newNode(root string, dry bool, out io.Writer) *node {
	return &node{root: root, live: filepath.Clean(root) == "/", dry: dry, out: out}
}

func (n *node) under(p string) string { return filepath.Join(n.root, p) }

// record is what an earlier install recorded (none: the zero Record).
func (n *node) record() (nodecfg.Record, error) {
	b, err := atomicfile.ReadRegular(n.under(nodecfg.InstallRecord))
	if errors.Is(err, fs.ErrNotExist) {
		return nodecfg.Record{}, nil
	}
	if err != nil {
		return nodecfg.Record{}, err
	}
	return nodecfg.ParseRecord(b)
}

func (n *node) exists(p string) bool {
	_, err := os.Lstat(n.under(p))
	return err == nil
}

// systemd says whether systemd runs this host (live only): its units can
// be enabled and started.
func (n *node) systemd() bool {
	if !n.live {
		return false
	}
	_, err := exec.LookPath("systemctl")
	return err == nil && n.exists("/run/systemd/system")
}

// run runs a command on a live host, or says what it would run.
func (n *node) run(ctx context.Context, why string, argv ...string) bool {
	line := strings.Join(argv, " ")
	switch {
	case n.dry:
		fmt.Fprintf(n.out, "%-9s %s   (%s)\n", "would run", line, why)
		return true
	case !n.live:
		fmt.Fprintf(n.out, "%-9s %s   (%s; the root is not /: run it on the node)\n", "not run", line, why)
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	b, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		n.errs = append(n.errs, fmt.Errorf("%s: %v: %s", line, err, bytes.TrimSpace(b)))
		fmt.Fprintf(n.out, "%-9s %s   (%s): %v\n%s", "FAILED", line, why, err, b)
		return false
	}
	fmt.Fprintf(n.out, "%-9s %s   (%s)\n", "ran", line, why)
	return true
}

func statGID(fi os.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Gid
	}
	return 0
}

// sysctlPath is where a sysctl is read and written.
func sysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// readSysctl reads a sysctl of this host ("" when it cannot).
func readSysctl(name string) string {
	b, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// facts are what the host says about its resolver.
func (n *node) facts() nodecfg.HostFacts {
	var h nodecfg.HostFacts
	h.ResolvLink, _ = os.Readlink(n.under("/etc/resolv.conf"))
	h.Resolv, _ = os.ReadFile(n.under("/etc/resolv.conf"))
	h.Resolved = n.exists("/run/systemd/resolve")
	h.NetworkManager = n.exists("/run/NetworkManager")
	return h
}

// kubeletEnvPath is the environment file this host's kubelet reads.
func (n *node) kubeletEnvPath() string {
	var dropIn []byte
	for _, p := range []string{
		"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
		"/etc/systemd/system/kubelet.service.d/10-kubeadm.conf",
		"/lib/systemd/system/kubelet.service.d/10-kubeadm.conf",
	} {
		if b, err := os.ReadFile(n.under(p)); err == nil {
			dropIn = b
			break
		}
	}
	release, _ := os.ReadFile(n.under("/etc/os-release"))
	return nodecfg.KubeletEnvPath(dropIn, release)
}

// install is render-node plus what a node needs beside its files, in one
// command that is safe to run again: the resolver wiring chosen for the
// host and started, kubelet pointed at this node's CoreDNS where that
// mode needs it, the sysctls, the mDNS key's owner and mode, and doctor's
// checks at the end. What it changes beyond files is recorded in
// /etc/infradns/install.json, for uninstall to undo exactly that.
func install(ctx context.Context, args []string, out io.Writer) error {
	fl := flags("install", "-f CLUSTER.yaml [-role ROLE] [-node NAME] [-root /] [-dry-run]")
	load := nodeFlags(fl, "control-plane, worker or bootstrap")
	root := fl.String("root", "/", "the node's root (a staging tree: files only, no command run)")
	dry := fl.Bool("dry-run", false, "print every change and command; change nothing")
	waitIDs := fl.Duration("wait-identities", 0, "wait this long for this node's identities (the identity unit's); fail without them")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		fl.Usage()
		return fmt.Errorf("install: unexpected argument %q", fl.Arg(0))
	}
	f, err := load()
	if err != nil {
		return err
	}
	n := newNode(*root, *dry, out)
	old, err := n.record()
	if err != nil {
		return err
	}

	// The resolver: the file's word, else what was installed, else what
	// this host runs.
	mode, why := f.Resolver, "the cluster file says so"
	if mode == "" && old.Resolver != "" {
		mode, why = old.Resolver, "as installed before ("+nodecfg.InstallRecord+")"
	}
	if mode == "" {
		if mode, why, err = nodecfg.DetectResolver(n.facts()); err != nil {
			return fmt.Errorf("install: %w", err)
		}
	}
	f.Resolver = mode
	fmt.Fprintf(out, "%-9s %s: %s\n", "resolver", mode, why)
	if mode == nodecfg.ResolverSystemdResolved && len(f.Listen) == 0 && f.Interface != "" && f.Interface != "auto" {
		// resolved's stub holds 127.0.0.53:53: CoreDNS binds the
		// cluster interface and lo, which one file for both kinds of
		// host cannot say for one of them.
		f.Listen = []string{f.Interface, "lo"}
		fmt.Fprintf(out, "%-9s [%s, lo]: systemd-resolved's stub holds 127.0.0.53:53\n", "listen", f.Interface)
	}
	v, err := f.Values()
	if err != nil {
		return err
	}
	if n.live {
		if err := checkLocalLink(f); err != nil {
			return err
		}
	}
	outs, err := nodecfg.Render(v)
	if err != nil {
		return err
	}

	rec := nodecfg.Record{Resolver: mode, Files: []string{nodecfg.SysctlConf}}
	outs = append(outs, nodecfg.Output{Path: nodecfg.SysctlConf, Mode: 0o644, Data: nodecfg.SysctlFile()})
	if v.Kubeconfig != "" && (v.Role == nodecfg.ControlPlane || v.Role == nodecfg.Worker) {
		// A node installed before it joins fetches its identities by
		// itself once it has: the cluster file and this binary where the
		// identity unit finds them.
		file, err := os.ReadFile(fl.Lookup("f").Value.String())
		if err != nil {
			return err
		}
		pathUnit, timer, service := nodecfg.IdentityUnits(v.Role, fl.Lookup("node").Value.String())
		outs = append(outs,
			nodecfg.Output{Path: nodecfg.ClusterFileCopy, Mode: 0o644, Data: file},
			nodecfg.Output{Path: nodecfg.IdentityPath, Mode: 0o644, Data: pathUnit},
			nodecfg.Output{Path: nodecfg.IdentityTimer, Mode: 0o644, Data: timer},
			nodecfg.Output{Path: nodecfg.IdentityService, Mode: 0o644, Data: service})
		rec.Files = append(rec.Files, nodecfg.ClusterFileCopy, nodecfg.IdentityPath, nodecfg.IdentityTimer, nodecfg.IdentityService)
		if self, err := os.Executable(); err == nil && filepath.Clean(self) != n.under(nodecfg.BinaryPath) && readable(self) {
			outs = append(outs, nodecfg.Output{Path: nodecfg.BinaryPath, Mode: 0o755, From: self})
			rec.Files = append(rec.Files, nodecfg.BinaryPath)
		}
	}
	if !v.Resolved {
		rec.Files = append(rec.Files, nodecfg.NMConf)
		outs = append(outs, nodecfg.Output{Path: nodecfg.NMConf, Mode: 0o644, Data: nodecfg.NMConfFile()})
	}
	// kubelet reads this node's CoreDNS first: in networkmanager mode
	// through /etc/resolv.conf (its default), in systemd-resolved mode
	// through the file the script writes, which kubelet must be told.
	envPath := n.kubeletEnvPath()
	if old.KubeletEnv != "" {
		envPath = old.KubeletEnv
	}
	env, err := atomicfile.ReadRegular(n.under(envPath))
	envMissing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !envMissing {
		return err
	}
	envMode := os.FileMode(0o644) // an existing file keeps its own
	if fi, err := os.Stat(n.under(envPath)); err == nil {
		envMode = fi.Mode().Perm()
	}
	switch {
	case v.Resolved:
		data, edit := nodecfg.SetKubeletResolvConf(env, nodecfg.KubeletResolv)
		rec.KubeletEnv, rec.KubeletEnvEdit, rec.KubeletEnvCreated = envPath, &edit, envMissing
		outs = append(outs, nodecfg.Output{Path: envPath, Mode: envMode, Data: data})
	case old.KubeletEnv != "" && old.KubeletEnvEdit != nil && !envMissing:
		// Installed in systemd-resolved mode before: kubelet goes back
		// to what it read then.
		outs = append(outs, nodecfg.Output{Path: envPath, Mode: envMode, Data: nodecfg.RemoveKubeletResolvConf(env, *old.KubeletEnvEdit)})
		old.KubeletEnv, old.KubeletEnvEdit = "", nil
	}
	changes, err := nodecfg.Plan(n.root, outs)
	if err != nil {
		return err
	}
	// A file an earlier install added that this one does not (the other
	// resolver mode's).
	for _, p := range old.Files {
		if !slices.Contains(rec.Files, p) && n.exists(p) {
			var b []byte
			if p != nodecfg.BinaryPath { // only ever shown as a diff, which a binary does not get
				b, _ = os.ReadFile(n.under(p))
			}
			changes = append(changes, nodecfg.Change{Action: nodecfg.Remove, Path: p, Under: n.under(p), Old: b})
		}
	}
	old.Files = slices.DeleteFunc(old.Files, func(p string) bool { return !slices.Contains(rec.Files, p) })
	changed := map[string]bool{}
	for _, c := range changes {
		if c.Action != nodecfg.Unchanged && c.Action != nodecfg.Keep {
			changed[c.Path] = true
		}
		switch {
		case !*dry:
		case c.Path == nodecfg.BinaryPath:
			if c.Action != nodecfg.Unchanged {
				fmt.Fprintf(out, "# %s %s: this binary (%d bytes)\n", c.Under, c.Action, c.Size)
			}
		default:
			fmt.Fprint(out, c.Diff())
		}
	}

	// Sysctls: the runtime values now, the file for the next boot.
	for _, s := range nodecfg.Sysctls() {
		if !n.live {
			continue
		}
		cur := readSysctl(s[0])
		if cur == s[1] || (cur != "" && s[0] == "net.ipv4.conf.all.arp_ignore" && cur > s[1]) {
			continue // 2 is stricter still: kept
		}
		if rec.Sysctls == nil {
			rec.Sysctls = map[string]string{}
		}
		rec.Sysctls[s[0]] = cur
		if *dry {
			fmt.Fprintf(out, "%-9s %s = %s (now %s)\n", "would set", s[0], s[1], cur)
			continue
		}
		if err := os.WriteFile(sysctlPath(s[0]), []byte(s[1]), 0o644); err != nil {
			n.errs = append(n.errs, fmt.Errorf("sysctl %s: %w", s[0], err))
			fmt.Fprintf(out, "%-9s %s = %s: %v\n", "FAILED", s[0], s[1], err)
			continue
		}
		fmt.Fprintf(out, "%-9s %s = %s (was %s)\n", "set", s[0], s[1], cur)
	}
	// The mDNS key: the pods' group reads it, nobody else.
	if v.MDNSKey != "" {
		fixKey(n, v.MDNSKey)
	}
	if *dry {
		runResolver(ctx, n, v, changed, &rec)
		enableIdentityUnit(ctx, n, changed, &rec)
		fmt.Fprintf(out, "# dry run: %d of %d files would change; nothing written, nothing run\n", len(changed), len(changes))
		return nil
	}

	if err := nodecfg.Install(changes, atomicfile.WriteIfChanged); err != nil {
		return err
	}
	for _, c := range changes {
		fmt.Fprintf(out, "%-9s %s\n", c.Action, c.Under)
	}
	// The kubeconfigs' directories: the pods mount them, and kubelet
	// starts no pod whose directory is missing. The identities come
	// later; uninstall leaves the directories to whoever put them there.
	for _, kc := range []string{v.Kubeconfig, v.DNSKubeconfig} {
		if d := filepath.Dir(kc); kc != "" && !n.exists(d) {
			if err := os.MkdirAll(n.under(d), 0o755); err != nil {
				return err
			}
			fmt.Fprintf(out, "%-9s %s/\n", nodecfg.Create, n.under(d))
		}
	}
	// The identities, when the node can read them: fetched when it has
	// none, renewed when they were.
	if n.live && v.Kubeconfig != "" {
		installIdentities(ctx, n, v)
		for start := time.Now(); *waitIDs > 0 && !n.exists(v.Kubeconfig); {
			if time.Since(start) > *waitIDs {
				return fmt.Errorf("install: no identity for this node after %s: run infradns identities -f CLUSTER.yaml on the first control-plane node", *waitIDs)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Second):
			}
			installIdentities(ctx, n, v)
		}
	}
	runResolver(ctx, n, v, changed, &rec)
	enableIdentityUnit(ctx, n, changed, &rec)
	// Recorded before doctor: what was changed is undone by uninstall
	// whatever doctor says.
	rec = rec.Merge(old)
	if _, err := atomicfile.WriteIfChanged(n.under(nodecfg.InstallRecord), rec.Marshal(), 0o644); err != nil {
		return err
	}

	if !n.live {
		// doctor asks the running node (its CoreDNS, its addresses),
		// which a staging tree is not.
		if len(n.errs) > 0 {
			return errors.Join(n.errs...)
		}
		fmt.Fprintf(out, "install: staged under %s; on the node itself: infradns install (the commands above, then doctor's checks)\n", n.root)
		return nil
	}
	fmt.Fprintln(out, "# doctor:")
	found := doctorChecks(ctx, f, doctorOpts{root: n.root, installing: true})
	rerr := report(out, found)
	waiting := 0
	for _, fd := range found {
		if fd.Verdict == next {
			waiting++
		}
	}
	switch {
	case rerr != nil || len(n.errs) > 0:
		fmt.Fprintf(out, "install: FAIL: %s\n", errors.Join(append(n.errs, rerr)...))
		return errors.Join(append(n.errs, rerr)...)
	case waiting > 0:
		fmt.Fprintf(out, "install: PASS (%d checks wait for the cluster); next: %s\n", waiting, nextStep(v, v.Kubeconfig == "" || n.exists(v.Kubeconfig), n.exists(kubeletConf)))
	default:
		fmt.Fprintf(out, "install: PASS; the node serves (infradns status: who holds the VIPs)\n")
	}
	return nil
}

// readable says whether install can copy path. One it cannot read (a
// user staging a tree with an executable of mode 0711) is left out: the
// copy failing would stop install halfway, after the other files.
func readable(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// enableIdentityUnit enables the identity path unit when it changed.
func enableIdentityUnit(ctx context.Context, n *node, changed map[string]bool, rec *nodecfg.Record) {
	if !changed[nodecfg.IdentityPath] && !changed[nodecfg.IdentityService] && !changed[nodecfg.IdentityTimer] {
		return
	}
	if !n.systemd() {
		fmt.Fprintf(n.out, "%-9s no systemd here: once the node has joined, run this install again for its identities\n", "note")
		return
	}
	n.run(ctx, "the units changed", "systemctl", "daemon-reload")
	if n.run(ctx, "this node's identities once it has joined, and daily their renewal", "systemctl", "enable", "--now", "infradns-identity.path", "infradns-identity.timer") {
		rec.Units = append(rec.Units, "infradns-identity.path", "infradns-identity.timer")
	}
}

// nextStep is what follows install on a node that waits for its cluster:
// kubeadm, then the identities, then kubelet's pods.
func nextStep(v nodecfg.Values, identities, joined bool) string {
	switch {
	case identities:
		return "kubelet starts the static pods; then infradns doctor -f CLUSTER.yaml"
	case joined && v.Role == nodecfg.ControlPlane:
		return "infradns identities -f CLUSTER.yaml (on the first control-plane node), or this install again once they exist"
	case joined:
		return "this install again once infradns identities has run on a control-plane node"
	case v.Role == nodecfg.ControlPlane:
		return "kubeadm init (the first control-plane node: then infradns identities -f CLUSTER.yaml) or kubeadm join --control-plane (then this install again)"
	}
	return "kubeadm join, then this install again (the node's identities)"
}

// fixKey gives the mDNS key the owner and mode the pods need (root:65532,
// 0640); a missing key is doctor's to report.
func fixKey(n *node, key string) {
	p := n.under(key)
	fi, err := os.Stat(p)
	if err != nil {
		return
	}
	gid := statGID(fi)
	if fi.Mode().Perm() == 0o640 && gid == podGID {
		return
	}
	if n.dry {
		fmt.Fprintf(n.out, "%-9s chown root:%d %s && chmod 0640 %s (now %04o, group %d)\n", "would run", podGID, key, key, fi.Mode().Perm(), gid)
		return
	}
	if err := os.Chown(p, 0, podGID); err != nil {
		n.errs = append(n.errs, fmt.Errorf("mDNS key: %w", err))
		return
	}
	if err := os.Chmod(p, 0o640); err != nil {
		n.errs = append(n.errs, fmt.Errorf("mDNS key: %w", err))
		return
	}
	fmt.Fprintf(n.out, "%-9s %s: root:%d 0640 (was %04o, group %d)\n", "fixed", p, podGID, fi.Mode().Perm(), gid)
}

// runResolver starts the resolver wiring: the dispatcher script now (and
// NetworkManager told to leave /etc/resolv.conf alone), or the units that
// run it in systemd-resolved mode, and kubelet restarted when its flags
// changed.
func runResolver(ctx context.Context, n *node, v nodecfg.Values, changed map[string]bool, rec *nodecfg.Record) {
	if !v.Resolved {
		if changed[nodecfg.NMConf] && n.exists("/run/NetworkManager") {
			if _, err := exec.LookPath("nmcli"); err == nil || n.dry {
				n.run(ctx, "NetworkManager reads rc-manager=unmanaged", "nmcli", "general", "reload")
			}
		}
		n.run(ctx, "the node's resolver: this node's CoreDNS first", n.under(nodecfg.DispatcherPath), v.Interface, "up")
		return
	}
	if n.systemd() {
		if changed[nodecfg.ResolverService] || changed[nodecfg.ResolverPath] {
			n.run(ctx, "the units changed", "systemctl", "daemon-reload")
		}
		if n.run(ctx, "rerun the script whenever resolved's servers change", append([]string{"systemctl", "enable", "--now"}, resolverUnits...)...) {
			rec.Units = slices.Clone(resolverUnits)
		}
		n.run(ctx, "the node's resolver: this node's CoreDNS first", "systemctl", "restart", "infradns-resolver.service")
		if changed[rec.KubeletEnv] {
			n.run(ctx, "kubelet reads "+nodecfg.KubeletResolv, "systemctl", "try-restart", "kubelet.service")
		}
		return
	}
	fmt.Fprintf(n.out, "%-9s no systemd here: the script runs once now, and nothing reruns it when the links' servers change\n", "note")
	n.run(ctx, "the node's resolver: this node's CoreDNS first", n.under(nodecfg.ResolverScript))
	if changed[rec.KubeletEnv] {
		fmt.Fprintf(n.out, "%-9s restart kubelet: it reads %s from %s\n", "note", nodecfg.KubeletResolv, rec.KubeletEnv)
	}
}

// installIdentities fetches the node's kubeconfigs from the identity
// Secrets (identities.go) with the credential the node has: kubeadm's
// administrator's on a control-plane node, else kubelet's on a joined node.
// With neither (before kubeadm init or join) it does nothing: doctor
// reports the kubeconfig as what comes next.
func installIdentities(ctx context.Context, n *node, v nodecfg.Values) {
	cred := identityCredential(n)
	if cred == "" {
		return
	}
	cs, _, err := clientFor(n.under(cred))
	if err != nil {
		fmt.Fprintf(n.out, "%-9s %s: %v\n", "no identity", cred, err)
		return
	}
	bound := 30 * time.Second
	if n.exists(v.Kubeconfig) {
		bound = 10 * time.Second // a renewal only: an API that is down does not hold install up
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	if err := fetchIdentities(ctx, cs, v, n.root, n.out); err != nil {
		n.errs = append(n.errs, fmt.Errorf("identities: %w", err))
	}
}

// identityCredential is the kubeconfig install reads the identities with:
// kubeadm's administrator's (a control-plane node), else kubelet's (a
// joined node: system:node:NAME, which may get the workers' and the DNS
// pods' identities only), else none ("").
func identityCredential(n *node) string {
	for _, p := range []string{adminConf, kubeletConf} {
		if n.exists(p) {
			return p
		}
	}
	return ""
}
