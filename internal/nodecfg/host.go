package nodecfg

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strings"
)

// What `infradns install` writes beside render-node's files. They are not
// in managed(): render-node run later keeps them; uninstall removes what
// the install record names.
const (
	// SysctlConf makes the node answer ARP only for addresses on the
	// asking interface (lbconfig's copy of a leaving VIP on lo, and the
	// hand-over relay, need it; kube-proxy's strictARP and MetalLB's L2
	// mode ask the same).
	SysctlConf = "/etc/sysctl.d/90-infradns.conf"
	// NMConf keeps NetworkManager from writing /etc/resolv.conf over the
	// dispatcher script's file.
	NMConf = "/etc/NetworkManager/conf.d/90-infradns.conf"
	// InstallRecord is what install changed beside its files, for
	// uninstall to undo exactly that.
	InstallRecord = ConfigDir + "/install.json"
)

// The sysctls install sets: name → value.
var installSysctls = []struct{ Name, Value string }{
	{"net.ipv4.conf.all.arp_ignore", "1"},
}

// Sysctls are the sysctls install sets, in order.
func Sysctls() [][2]string {
	out := make([][2]string, len(installSysctls))
	for i, s := range installSysctls {
		out[i] = [2]string{s.Name, s.Value}
	}
	return out
}

// SysctlFile is SysctlConf's content.
func SysctlFile() []byte {
	var b bytes.Buffer
	b.WriteString("# Written by infradns install; infradns uninstall removes it.\n")
	b.WriteString("# A VIP that leaves this node stays on lo for a second (lbconfig's copy) and\n")
	b.WriteString("# must not be answered for on the node's interface meanwhile: answer ARP only\n")
	b.WriteString("# for addresses on the asking interface.\n")
	for _, s := range installSysctls {
		fmt.Fprintf(&b, "%s = %s\n", s.Name, s.Value)
	}
	return b.Bytes()
}

// NMConfFile is NMConf's content.
func NMConfFile() []byte {
	return []byte("# Written by infradns install; infradns uninstall removes it.\n" +
		"# The infradns dispatcher script writes /etc/resolv.conf (this node's CoreDNS\n" +
		"# first); NetworkManager must not write over it.\n" +
		"[main]\nrc-manager=unmanaged\n")
}

// HostFacts are what install reads of a host to choose its resolver wiring.
type HostFacts struct {
	// ResolvLink is /etc/resolv.conf's symlink target ("" for a regular
	// file or none).
	ResolvLink string
	// Resolv is /etc/resolv.conf's content.
	Resolv []byte
	// Resolved: systemd-resolved runs (its /run/systemd/resolve exists).
	Resolved bool
	// NetworkManager: NetworkManager runs (its /run/NetworkManager exists).
	NetworkManager bool
}

// resolvedStub is systemd-resolved's stub listener.
var resolvedStub = netip.MustParseAddr("127.0.0.53")

// DetectResolver says which resolver wiring fits a host, and why. The
// wiring follows who owns /etc/resolv.conf: systemd-resolved's stub there
// (Ubuntu, Fedora, Debian with resolved; NetworkManager may configure the
// links and hand resolved their servers) is systemd-resolved mode, which
// leaves the file alone; a file NetworkManager writes is networkmanager
// mode, whose dispatcher script writes it instead.
func DetectResolver(h HostFacts) (mode, why string, err error) {
	link := path.Clean(h.ResolvLink)
	stubOnly := false
	if ns := Nameservers(h.Resolv); len(ns) > 0 {
		stubOnly = !slices.ContainsFunc(ns, func(a netip.Addr) bool { return a != resolvedStub })
	}
	switch {
	case h.ResolvLink != "" && strings.Contains(link, "/systemd/resolve/"):
		return ResolverSystemdResolved, "/etc/resolv.conf links to " + h.ResolvLink, nil
	case h.Resolved && stubOnly:
		return ResolverSystemdResolved, "/etc/resolv.conf names systemd-resolved's stub 127.0.0.53 only", nil
	case h.NetworkManager:
		return ResolverNetworkManager, "NetworkManager runs and /etc/resolv.conf is not systemd-resolved's stub", nil
	case h.Resolved:
		// resolved runs but does not own the file (another tool writes
		// it): routing the domain through resolved reaches only what
		// asks resolved.
		return "", "", fmt.Errorf("systemd-resolved runs but /etc/resolv.conf is not its stub, and NetworkManager does not run: " +
			"link /etc/resolv.conf to /run/systemd/resolve/stub-resolv.conf, or set resolver: in the cluster file")
	}
	return "", "", fmt.Errorf("neither NetworkManager nor systemd-resolved runs here: nothing would keep this node's resolver on its CoreDNS; " +
		"enable one of them (netplan hosts: systemd-resolved), or set resolver: in the cluster file and wire /etc/resolv.conf yourself (docs/operator-guide.md, The node resolver)")
}

// Nameservers are resolv.conf's nameserver addresses, in order.
func Nameservers(resolv []byte) []netip.Addr {
	var out []netip.Addr
	sc := bufio.NewScanner(bytes.NewReader(resolv))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "nameserver" {
			if a, err := netip.ParseAddr(f[1]); err == nil {
				out = append(out, a.Unmap())
			}
		}
	}
	return out
}

// Kubelet's extra flags. kubeadm's systemd drop-in for kubelet reads
// KUBELET_EXTRA_ARGS from an environment file (/etc/default/kubelet on
// Debian-like hosts, /etc/sysconfig/kubelet on RHEL-like ones) and lets
// it override the configuration file kubeadm writes at init and join: so
// the flag holds before `kubeadm init` and after, where an edit of
// /var/lib/kubelet/config.yaml would be overwritten by kubeadm.
const (
	KubeletEnvDebian = "/etc/default/kubelet"
	KubeletEnvRHEL   = "/etc/sysconfig/kubelet"
	kubeletExtraArgs = "KUBELET_EXTRA_ARGS"
	resolvConfFlag   = "--resolv-conf"
)

// KubeletEnvPath says which environment file kubelet reads on a host:
// the one kubeadm's drop-in names (dropIn, its content, may be empty),
// else by the host's family from /etc/os-release (ID and ID_LIKE).
func KubeletEnvPath(dropIn, osRelease []byte) string {
	for _, p := range []string{KubeletEnvDebian, KubeletEnvRHEL} {
		if bytes.Contains(dropIn, []byte("EnvironmentFile=-"+p)) || bytes.Contains(dropIn, []byte("EnvironmentFile="+p)) {
			return p
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(osRelease))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || (k != "ID" && k != "ID_LIKE") {
			continue
		}
		for _, id := range strings.Fields(strings.Trim(v, `"'`)) {
			switch id {
			case "rhel", "fedora", "centos", "rocky", "almalinux", "ol", "amzn":
				return KubeletEnvRHEL
			}
		}
	}
	return KubeletEnvDebian
}

// KubeletEnvEdit is what SetKubeletResolvConf did to the environment file.
type KubeletEnvEdit struct {
	// AddedLine: there was no KUBELET_EXTRA_ARGS line; the edit added one.
	AddedLine bool `json:"addedLine,omitempty"`
	// Previous is the --resolv-conf value the line had before ("" none).
	Previous string `json:"previous,omitempty"`
	// AddedQuotes: the line had one word unquoted, the edit quoted it.
	AddedQuotes bool `json:"addedQuotes,omitempty"`
}

// SetKubeletResolvConf sets kubelet's --resolv-conf flag to value in the
// environment file's KUBELET_EXTRA_ARGS (value "" removes it), keeping
// every other flag and line. It reports the new content and what it
// found.
func SetKubeletResolvConf(env []byte, value string) ([]byte, KubeletEnvEdit) {
	var out []string
	var edit KubeletEnvEdit
	found := false
	lines := strings.Split(strings.TrimSuffix(string(env), "\n"), "\n")
	if len(env) == 0 {
		lines = nil
	}
	for _, l := range lines {
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(k), "export ")) != kubeletExtraArgs || found {
			out = append(out, l)
			continue
		}
		found = true
		quote := ""
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			quote, v = v[:1], v[1:len(v)-1]
		}
		args := strings.Fields(v)
		var kept []string
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case strings.HasPrefix(a, resolvConfFlag+"="):
				edit.Previous = strings.TrimPrefix(a, resolvConfFlag+"=")
				continue
			case a == resolvConfFlag && i+1 < len(args):
				edit.Previous = args[i+1]
				i++
				continue
			}
			kept = append(kept, a)
		}
		if value != "" {
			kept = append(kept, resolvConfFlag+"="+value)
		}
		if quote == "" && len(kept) > 1 {
			quote, edit.AddedQuotes = `"`, true
		}
		out = append(out, k+"="+quote+strings.Join(kept, " ")+quote)
	}
	if !found && value != "" {
		edit.AddedLine = true
		out = append(out, kubeletExtraArgs+"="+resolvConfFlag+"="+value)
	}
	if len(out) == 0 {
		return nil, edit
	}
	return []byte(strings.Join(out, "\n") + "\n"), edit
}

// RemoveKubeletResolvConf undoes SetKubeletResolvConf as recorded: the
// previous --resolv-conf back (or none), and the line gone when the edit
// added it and nothing else was put on it since.
func RemoveKubeletResolvConf(env []byte, rec KubeletEnvEdit) []byte {
	b, _ := SetKubeletResolvConf(env, rec.Previous)
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if ok && strings.TrimSpace(k) == kubeletExtraArgs {
			words := strings.Fields(strings.Trim(v, `"'`))
			if rec.AddedLine && len(words) == 0 {
				continue
			}
			if rec.AddedQuotes && len(words) == 1 && len(v) >= 2 && v[0] == '"' {
				l = k + "=" + words[0]
			}
		}
		if l != "" || len(out) > 0 {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return []byte(strings.Join(out, "\n") + "\n")
}

// Record is what an install changed beyond the files it wrote, so that
// uninstall undoes that and nothing else.
type Record struct {
	// Resolver is the wiring chosen (the file's, or what the host has).
	Resolver string `json:"resolver"`
	// Files are the files install created or rewrote beside render-node's
	// (SysctlConf, NMConf): removed by uninstall.
	Files []string `json:"files,omitempty"`
	// KubeletEnv is the environment file whose KUBELET_EXTRA_ARGS carries
	// --resolv-conf (systemd-resolved mode), and what was there before.
	KubeletEnv     string          `json:"kubeletEnv,omitempty"`
	KubeletEnvEdit *KubeletEnvEdit `json:"kubeletEnvEdit,omitempty"`
	// KubeletEnvCreated: the file did not exist before.
	KubeletEnvCreated bool `json:"kubeletEnvCreated,omitempty"`
	// Sysctls are the runtime values install changed, name → the value
	// before: uninstall puts it back while the value is still install's.
	Sysctls map[string]string `json:"sysctls,omitempty"`
	// Units are the systemd units install enabled.
	Units []string `json:"units,omitempty"`
}

// ParseRecord reads an install record.
func ParseRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", InstallRecord, err)
	}
	return r, nil
}

// Marshal is the record as the file holds it.
func (r Record) Marshal() []byte {
	b, _ := json.MarshalIndent(r, "", "  ")
	return append(b, '\n')
}

// Merge keeps what an earlier install recorded: the value before the
// first install is the one to restore, not install's own from a re-run.
func (r Record) Merge(old Record) Record {
	for _, f := range old.Files {
		if !slices.Contains(r.Files, f) {
			r.Files = append(r.Files, f)
		}
	}
	for _, u := range old.Units {
		if !slices.Contains(r.Units, u) {
			r.Units = append(r.Units, u)
		}
	}
	if old.KubeletEnv != "" && old.KubeletEnv == r.KubeletEnv {
		r.KubeletEnvEdit, r.KubeletEnvCreated = old.KubeletEnvEdit, old.KubeletEnvCreated
	}
	for k, v := range old.Sysctls {
		if r.Sysctls == nil {
			r.Sysctls = map[string]string{}
		}
		r.Sysctls[k] = v
	}
	slices.Sort(r.Files)
	slices.Sort(r.Units)
	return r
}

// What install puts on the node so that a node installed before it joined
// fetches its identities by itself once it has (kubeadm join writes the
// credential the fetch reads).
const (
	// BinaryPath is where install puts itself: the identity unit runs it.
	BinaryPath = "/usr/local/bin/infradns"
	// ClusterFileCopy is the cluster file install ran from, for the unit.
	ClusterFileCopy = ConfigDir + "/cluster.yaml"
	IdentityService = "/etc/systemd/system/infradns-identity.service"
	IdentityPath    = "/etc/systemd/system/infradns-identity.path"
	IdentityTimer   = "/etc/systemd/system/infradns-identity.timer"
	// The credentials the fetch reads: kubeadm's administrator's on a
	// control-plane node (written late in kubeadm join --control-plane,
	// after kubelet's), kubelet's on the others.
	AdminConf   = "/etc/kubernetes/admin.conf"
	KubeletConf = "/etc/kubernetes/kubelet.conf"
)

// IdentityWait is how long the identity service waits for the identities
// to be published (infradns identities on the first control-plane node)
// before it fails and systemd starts it again.
const IdentityWait = "1h"

// IdentityUnits are the path unit that starts the identity service once
// the node's credential exists, the timer that starts it daily (the
// renewals), and that service: install again, which fetches this node's
// identities or their renewal, waiting for them, for this node's role (and
// name, when install was given one); on a control-plane node first
// infradns identities, which renews them within 30 days of their end.
func IdentityUnits(role, node string) (pathUnit, timer, service []byte) {
	cred := KubeletConf
	renew := ""
	if role == ControlPlane {
		cred = AdminConf
		renew = "ExecStartPre=-" + BinaryPath + " identities -f " + ClusterFileCopy + "\n"
	}
	args := "install -f " + ClusterFileCopy + " -role " + role
	if node != "" {
		args += " -node " + node
	}
	pathUnit = []byte(`# Written by infradns install; infradns uninstall removes it.
# Starts infradns-identity.service once ` + cred + ` exists: the node has
# joined (kubeadm), and can read its identities.
[Unit]
Description=infradns: this node's identities once it has joined

[Path]
PathExists=` + cred + `
Unit=infradns-identity.service

[Install]
WantedBy=paths.target
`)
	timer = []byte(`# Written by infradns install; infradns uninstall removes it.
# Starts infradns-identity.service daily: identities are renewed within 30
# days of their end (a year), and each node fetches its renewal.
[Unit]
Description=infradns: renew this node's identities

[Timer]
OnBootSec=15min
OnUnitActiveSec=1d
RandomizedDelaySec=1h
Unit=infradns-identity.service

[Install]
WantedBy=timers.target
`)
	service = []byte(`# Written by infradns install; infradns uninstall removes it.
# install again, which fetches this node's kubeconfigs from the identities
# infradns identities published, or their renewal (waiting for them).
[Unit]
Description=infradns: fetch or renew this node's identities
Documentation=https://github.com/infradns/infradns/blob/main/docs/operator-guide.md#install-on-a-kubeadm-cluster
ConditionPathExists=` + cred + `
After=network-online.target

[Service]
Type=simple
` + renew + `ExecStart=` + BinaryPath + ` ` + args + ` -wait-identities ` + IdentityWait + `
Restart=on-failure
RestartSec=30
`)
	return pathUnit, timer, service
}
