//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/nodecfg"
	"github.com/infradns/infradns/test/e2e/lab"
)

// resolvedBinaries returns a directory holding Debian's systemd-resolved
// and resolvectl with the libsystemd-shared they link (run them with
// LD_LIBRARY_PATH=libdir: the pair need not
// match the host's systemd), extracted from the packages, never installed:
// systemd-resolved's postinst would point the host's /etc/resolv.conf at its
// stub. The installed systemd's version when the archive still has it,
// else the archive's. Cached.
func resolvedBinaries(t *testing.T) (dir, libdir string) {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "systemd").Output(); err == nil {
		versions = append(versions, strings.TrimSpace(string(out)))
	}
	versions = append(versions, "") // the archive's candidate
	var tried []string
	for _, version := range versions {
		if version != "" {
			dir = filepath.Join(base, "infradns", "systemd-resolved", version)
			if lib := resolvedLib(dir); lib != "" {
				return dir, lib
			}
		}
		tmp := t.TempDir()
		pkgs := []string{"systemd-resolved", "libsystemd-shared"}
		if version != "" {
			pkgs = []string{"systemd-resolved=" + version, "libsystemd-shared=" + version}
		}
		out, err := aptDownload(tmp, pkgs)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%v: %v\n%s", pkgs, err, out))
			continue
		}
		debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
		if len(debs) != 2 {
			t.Fatalf("apt-get download %v: %v", pkgs, debs)
		}
		if version == "" {
			v, err := exec.Command("dpkg-deb", "-f", debs[0], "Version").Output()
			if err != nil {
				t.Fatal(err)
			}
			version = strings.TrimSpace(string(v))
		}
		dir = filepath.Join(base, "infradns", "systemd-resolved", version)
		part := dir + ".part"
		_ = os.RemoveAll(part)
		if err := os.MkdirAll(part, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, deb := range debs {
			if out, err := exec.Command("dpkg-deb", "-x", deb, part).CombinedOutput(); err != nil {
				t.Fatalf("dpkg-deb -x %s: %v\n%s", deb, err, out)
			}
		}
		_ = os.RemoveAll(dir)
		if err := os.Rename(part, dir); err != nil {
			t.Fatal(err)
		}
		if lib := resolvedLib(dir); lib != "" {
			return dir, lib
		}
		t.Fatalf("%v extracted to %s without systemd-resolved or libsystemd-shared", pkgs, dir)
	}
	t.Fatalf("systemd-resolved from Debian's archive:\n%s", strings.Join(tried, "\n"))
	return "", ""
}

// resolvedLib is the directory of libsystemd-shared under an extracted
// tree that also holds systemd-resolved, or "".
func resolvedLib(dir string) string {
	if _, err := os.Stat(filepath.Join(dir, "lib/systemd/systemd-resolved")); err != nil {
		return ""
	}
	libs, _ := filepath.Glob(filepath.Join(dir, "usr/lib/*/systemd/libsystemd-shared-*.so"))
	if len(libs) == 0 {
		return ""
	}
	return filepath.Dir(libs[0])
}

// aptDownload fetches pkgs into dir, updating the package lists once if
// they do not know them (a fresh machine's may be empty).
func aptDownload(dir string, pkgs []string) ([]byte, error) {
	dl := func() ([]byte, error) {
		c := exec.Command("apt-get", append([]string{"download"}, pkgs...)...)
		c.Dir = dir
		return c.CombinedOutput()
	}
	out, err := dl()
	if err == nil {
		return out, nil
	}
	if up, err := exec.Command("apt-get", "update", "-qq").CombinedOutput(); err != nil {
		return append(out, up...), err
	}
	return dl()
}

// TestSystemdResolvedReal runs the systemd-resolved mode against a real
// systemd-resolved (Debian's, on a private D-Bus system bus in the node's
// namespaces, its link server set over D-Bus as systemd-networkd does from
// netplan): `infradns install` with a cluster file that names no resolver
// (it finds resolved's stub and runs the script once), resolved restarted
// as the script asks, the unit's ExecStart as rendered run again. The
// cluster domain goes to the node's CoreDNS, other names to the link's
// server; with the node's CoreDNS down, resolved falls over to the API
// VIP's. uninstall then undoes what install did.
func TestSystemdResolvedReal(t *testing.T) {
	for _, tool := range []string{"dbus-daemon", "dig", "getent", "nsenter", "unshare", "apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (hack/install-deps.sh installs it): %v", tool, err)
		}
	}
	infradns, coredns := lab.Binary(t, "infradns"), lab.Binary(t, "coredns")
	l := lab.New(t, lab.Config{Prefix: "rs", Nodes: 1, Client: true, TeardownGrace: time.Second})
	site := startSiteDNS(t, l, coredns)

	// The API VIP's holder: a CoreDNS on the VIP that answers one name
	// otherwise than the node's (which gives every apps name the ingress
	// VIP), to tell who answered.
	vip, ingressVIP := lab.Host4(130), lab.Host4(131)
	const probe, holderAddr = "probe.apps." + domain + ".", "198.51.100.77"
	holder := l.AddClient("vipholder")
	if err := holder.AddAddr(netip.PrefixFrom(vip, 32)); err != nil {
		t.Fatal(err)
	}
	holderConf := filepath.Join(t.TempDir(), "Corefile")
	writeFile(t, holderConf, fmt.Sprintf(".:53 {\n    bind %s\n    hosts {\n        %s %s\n        %s api.%s\n    }\n}\n", vip, holderAddr, probe, vip, domain))
	holder.Start("coredns", []string{coredns, "-conf", holderConf})

	n := l.Nodes()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// /usr too: install puts the script under /usr/local/libexec.
	k := startKLNode(ctx, t, n, t.TempDir(), "/etc", "/var/lib", "/usr")

	// One file for every kind of host: no resolver, no listen. install
	// finds resolved's stub and wires this node for it.
	clusterFile := filepath.Join(t.TempDir(), "cluster.yaml")
	writeFile(t, clusterFile, fmt.Sprintf(`cluster: rslab
domain: %s
apiVIPs: [%s]
ingressVIPs: [%s]
interface: %s
image: %s
kubeconfig: /etc/kubernetes/infradns/kubeconfig
`, domain, vip, ingressVIP, lab.Iface, klImage))

	rh := startResolvedHost(ctx, t, k, site.IPv4)
	resolvectl, ld := rh.resolvectl, rh.ld
	shim, calls := systemctlShim(t)
	path := "PATH=" + shim + ":/usr/sbin:/usr/bin:/sbin:/bin"
	// A fresh host's arp_ignore (the lab's nodes have 1): install raises
	// it, uninstall puts it back.
	if out, err := k.run(ctx, "sysctl", "-qw", "net.ipv4.conf.all.arp_ignore=0"); err != nil {
		t.Fatal(err, out)
	}
	out, err := k.run(ctx, "env", path, infradns, "install", "-f", clusterFile, "-role", nodecfg.Worker, "-node", n.Name)
	t.Logf("infradns install:\n%s", out)
	if err != nil || !strings.Contains(out, "resolver  systemd-resolved: ") || !strings.Contains(out, "listen    ["+lab.Iface+", lo]") || !strings.Contains(out, "install: PASS") {
		t.Fatalf("infradns install on a systemd-resolved host: %v", err)
	}
	if got, err := k.run(ctx, "cat", "/proc/sys/net/ipv4/conf/all/arp_ignore"); err != nil || strings.TrimSpace(got) != "1" {
		t.Errorf("arp_ignore after install: %q %v, want 1", got, err)
	}
	if got, want := string(mustRead(t, k.path(nodecfg.KubeletEnvDebian))), "KUBELET_EXTRA_ARGS=--resolv-conf="+nodecfg.KubeletResolv+"\n"; got != want {
		t.Errorf("%s: %q, want %q", nodecfg.KubeletEnvDebian, got, want)
	}
	if got, _ := os.ReadFile(calls); string(got) != "try-reload-or-restart systemd-resolved.service\n" {
		t.Fatalf("the script asked systemctl %q, want a restart of resolved once:\n%s", got, out)
	}

	// The node's CoreDNS, from the rendered Corefile (up before resolved
	// reads the drop-in: resolved keeps asking whichever server answered
	// last, so a node's CoreDNS that starts later is only asked once the
	// API VIP's fails; see below).
	cd := k.start(t, "coredns", coredns, "-conf", nodecfg.Corefile)
	lab.Eventually(t, 20*time.Second, 50*time.Millisecond, "the node's CoreDNS answers", func() error {
		_, err := k.run(ctx, "dig", "+time=1", "+tries=1", "+short", "@"+n.IPv4.String(), "api-int."+domain)
		return err
	})

	// The unit, as systemd would run it (its ExecStart as rendered).
	unit := string(mustRead(t, k.path(nodecfg.ResolverService)))
	var execStart string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			execStart = v
		}
	}
	if execStart == "" {
		t.Fatalf("%s has no ExecStart:\n%s", nodecfg.ResolverService, unit)
	}
	runUnit := func() string {
		t.Helper()
		out, err := k.run(ctx, append([]string{"env", path}, strings.Fields(execStart)...)...)
		if err != nil {
			t.Fatalf("%s: %v", execStart, err)
		}
		return out
	}
	// What systemctl would do: restart resolved (networkd pushes the link
	// servers again).
	rh.restart()

	nodeIP := n.IPv4.String()
	if got, want := string(mustRead(t, k.path(nodecfg.ResolvedDropIn))), fmt.Sprintf("[Resolve]\nDNS=%s %s\nDomains=~%s\n", nodeIP, vip, domain); !strings.HasSuffix(got, want) {
		t.Errorf("drop-in:\n%s\nwant it to end with:\n%s", got, want)
	}
	if got, want := string(mustRead(t, k.path(nodecfg.ForwardConf))), fmt.Sprintf("forward . %s\n", site.IPv4); !strings.HasSuffix(got, want) {
		t.Errorf("forward.conf:\n%s\nwant it to end with %q (resolved's list without this node and the VIP)", got, want)
	}
	if got, want := string(mustRead(t, k.path(nodecfg.KubeletResolv))), fmt.Sprintf("nameserver %s\nnameserver %s\nnameserver %s\n", nodeIP, vip, site.IPv4); !strings.Contains(got, want) {
		t.Errorf("kubelet-resolv.conf:\n%s\nwant %q", got, want)
	}
	// resolved read the drop-in: its own resolv.conf lists the node and
	// the VIP as global servers, then the link's.
	if got := string(mustRead(t, k.path("/run/systemd/resolve/resolv.conf"))); !strings.Contains(got, fmt.Sprintf("nameserver %s\nnameserver %s\nnameserver %s\n", nodeIP, vip, site.IPv4)) {
		t.Errorf("resolved's resolv.conf:\n%s", got)
	}
	// Running it again changes nothing and restarts nothing.
	runUnit()
	if got, _ := os.ReadFile(calls); strings.Count(string(got), "\n") != 1 {
		t.Errorf("a second run asked systemctl again: %q", got)
	}

	stub := func(name string) (string, error) {
		out, err := k.run(ctx, "dig", "+time=2", "+tries=1", "+short", "@127.0.0.53", name, "A")
		return strings.TrimSpace(out), err
	}
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "the cluster domain through resolved's stub", func() error {
		if got, err := stub("api-int." + domain); err != nil || got != vip.String() {
			return fmt.Errorf("api-int: %q %v", got, err)
		}
		return nil
	})
	// The node's CoreDNS is asked first while it answers.
	if got, err := stub(probe); err != nil || got != ingressVIP.String() {
		t.Errorf("%s through resolved with the node's CoreDNS up: %q %v, want the node's answer %s", probe, got, err, ingressVIP)
	}
	if got, err := stub(bootSiteName); err != nil || got != bootSiteAddr {
		t.Errorf("%s through resolved: %q %v, want %s from the link's server", bootSiteName, got, err, bootSiteAddr)
	}
	// glibc, as every process on the host resolves: through the stub.
	if out, err := k.run(ctx, "getent", "ahostsv4", "api."+domain); err != nil || strings.Fields(out)[0] != vip.String() {
		t.Errorf("getent ahostsv4 api.%s: %q %v", domain, out, err)
	}

	// The node's CoreDNS down (a restart, an upgrade): resolved moves to
	// the next global server, the API VIP's.
	if err := cd.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// resolved answers what it has cached (the node's answers, for their
	// TTL) without asking: the failover is measured past its cache.
	if out, err := k.run(ctx, "env", ld, resolvectl, "flush-caches"); err != nil {
		t.Fatal(err, out)
	}
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "the cluster domain from the API VIP's CoreDNS", func() error {
		if got, err := stub(probe); err != nil || got != holderAddr {
			return fmt.Errorf("%s: %q %v", probe, got, err)
		}
		return nil
	})
	t.Logf("node's CoreDNS killed: resolved answered the cluster domain from the API VIP's %v later", time.Since(down).Round(time.Millisecond))
	if got, err := stub("api." + domain); err != nil || got != vip.String() {
		t.Errorf("api.%s with the node's CoreDNS down: %q %v", domain, got, err)
	}
	// Back up: resolved stays on the server that answered last (the VIP's,
	// with the same names) until that one fails; the cluster's names keep
	// resolving either way.
	k.start(t, "coredns", coredns, "-conf", nodecfg.Corefile)
	lab.Eventually(t, 30*time.Second, 200*time.Millisecond, "the node's CoreDNS back", func() error {
		_, err := k.run(ctx, "dig", "+time=1", "+tries=1", "+short", "@"+nodeIP, "api-int."+domain)
		return err
	})
	if got, err := stub("api-int." + domain); err != nil || got != vip.String() {
		t.Errorf("api-int.%s once the node's CoreDNS is back: %q %v", domain, got, err)
	}

	// uninstall undoes what install did: kubelet's flag (the file was
	// install's), the sysctl, the drop-in and the record. No systemd to
	// restart kubelet here, so the file kubelet reads stays, and says so.
	out, err = k.run(ctx, "env", path, infradns, "uninstall", "-f", clusterFile, "-o", "/")
	t.Logf("infradns uninstall:\n%s", out)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{nodecfg.KubeletEnvDebian, nodecfg.ResolvedDropIn, nodecfg.InstallRecord, nodecfg.SysctlConf, nodecfg.ResolverService} {
		if _, err := os.Lstat(k.path(p)); err == nil {
			t.Errorf("%s still there after uninstall", p)
		}
	}
	if !strings.Contains(out, "kubelet still reads it") {
		t.Errorf("uninstall without systemd did not keep %s for kubelet", nodecfg.KubeletResolv)
	}
	if got, err := k.run(ctx, "cat", "/proc/sys/net/ipv4/conf/all/arp_ignore"); err != nil || strings.TrimSpace(got) != "0" {
		t.Errorf("arp_ignore after uninstall: %q %v, want 0 as before install", got, err)
	}
}

// resolvedHost is a lab node made a netplan/networkd host: systemd-resolved
// (Debian's) on a private D-Bus system bus in the node's namespaces, its
// stub in /etc/resolv.conf, the link's DNS server pushed over the bus as
// systemd-networkd does from netplan.
type resolvedHost struct {
	t          *testing.T
	ctx        context.Context
	k          *klNode
	site       netip.Addr
	rd, ld     string // the extracted packages, LD_LIBRARY_PATH=...
	resolvectl string
	proc       *lab.Process
}

func startResolvedHost(ctx context.Context, t *testing.T, k *klNode, site netip.Addr) *resolvedHost {
	t.Helper()
	rd, libdir := resolvedBinaries(t)
	r := &resolvedHost{t: t, ctx: ctx, k: k, site: site, rd: rd, ld: "LD_LIBRARY_PATH=" + libdir, resolvectl: filepath.Join(rd, "usr/bin/resolvectl")}
	// The host as a netplan/networkd machine has it: resolved's stub in
	// /etc/resolv.conf, its user, its bus policy; then the system bus and
	// resolved.
	writeFile(t, k.path("/etc/resolv.conf"), "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n")
	appendFile(t, k.path("/etc/passwd"), "systemd-resolve:x:991:991:systemd Resolver:/:/usr/sbin/nologin\n")
	appendFile(t, k.path("/etc/group"), "systemd-resolve:x:991:\n")
	if out, err := k.run(ctx, "mkdir", "-p", "/etc/dbus-1/system.d", "/run/dbus", "/run/systemd"); err != nil {
		t.Fatal(err, out)
	}
	writeFile(t, k.path("/etc/dbus-1/system.d/org.freedesktop.resolve1.conf"), string(mustRead(t, filepath.Join(rd, "usr/share/dbus-1/system.d/org.freedesktop.resolve1.conf"))))
	k.start(t, "dbus", "dbus-daemon", "--system", "--nofork", "--nopidfile")
	r.start()
	return r
}

func (r *resolvedHost) start() {
	r.t.Helper()
	r.proc = r.k.start(r.t, "resolved", "env", r.ld, filepath.Join(r.rd, "lib/systemd/systemd-resolved"))
	// systemd-networkd's part: the link's DNS server (netplan's
	// nameservers), pushed over the bus once resolved is on it.
	lab.Eventually(r.t, 20*time.Second, 100*time.Millisecond, r.k.n.Name+": resolved takes the link's DNS server", func() error {
		_, err := r.k.run(r.ctx, "env", r.ld, r.resolvectl, "dns", lab.Iface, r.site.String())
		return err
	})
}

// restart is what systemctl does when the script asks: resolved
// restarted, networkd pushing the link's server again.
func (r *resolvedHost) restart() {
	r.t.Helper()
	if err := r.proc.Stop(5 * time.Second); err != nil && !r.proc.Exited() {
		r.t.Fatal(err)
	}
	r.start()
}

// systemctlShim is a directory holding a systemctl that records what it
// is asked (one line per call, in calls): the lab's nodes run no systemd.
func systemctlShim(t *testing.T) (dir, calls string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	calls = filepath.Join(filepath.Dir(dir), "systemctl.calls")
	writeFile(t, filepath.Join(dir, "systemctl"), "#!/bin/sh\necho \"$*\" >>"+calls+"\n")
	if err := os.Chmod(filepath.Join(dir, "systemctl"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, calls
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
