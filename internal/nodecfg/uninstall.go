package nodecfg

import (
	"bufio"
	"bytes"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// Uninstall order: the static pods first, so kubelet stops keepalived
// (which sends its priority-0 goodbye and another node takes the VIP within
// an advert interval) and CoreDNS before their files go; then the
// dispatcher script, so no network event rewrites resolv.conf behind the
// restore (in systemd-resolved mode the units, then the script); then the
// configuration, and what the script wrote.
func UninstallPaths() []string {
	var out []string
	for _, p := range []string{"keepalived", "haproxy", "lbconfig", "mdns-publisher", "coredns"} {
		out = append(out, ManifestDir+"/infradns-"+p+".yaml")
	}
	out = append(out, DispatcherPath, ResolverPathWant, ResolverServiceWant, ResolverPath, ResolverService, ResolverScript,
		Corefile, LBCorefile, ResolvEnv, ForwardConf, KubeletResolv, ResolvedDropIn,
		LBDir+"/keepalived.conf", LBDir+"/haproxy.cfg")
	return out
}

// UninstallDirs are removed when empty once the files are gone; the mDNS key
// and the kubeconfig stay (the administrator made them).
func UninstallDirs() []string {
	return []string{LBDir, ConfigDir, TrackDir, KeepalivedRunDir, HAProxyRunDir, RunDir}
}

// ResolvTimeoutOptions are the resolver options the dispatcher script adds
// to resolv.conf when its source sets no timeout (RESOLV_TIMEOUT_OPTIONS).
const ResolvTimeoutOptions = "timeout:1 attempts:2"

// RestoreResolv takes out of resolv.conf what the dispatcher script put in:
// the nameservers in drop (this node's addresses: it put one first; the
// API VIPs: it put one second), its options line (ResolvTimeoutOptions) and
// the cluster domain at the head of the search list. The upstreams it copied stay, so
// the node keeps resolving until NetworkManager or systemd-resolved writes
// its own file again. It reports whether anything changed.
func RestoreResolv(resolv []byte, domain string, drop []netip.Addr) ([]byte, bool) {
	var out bytes.Buffer
	changed := false
	sc := bufio.NewScanner(bytes.NewReader(resolv))
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "nameserver":
			if a, err := netip.ParseAddr(f[1]); err == nil && slices.Contains(drop, a.Unmap()) {
				changed = true
				continue
			}
		case strings.Join(f, " ") == "options "+ResolvTimeoutOptions:
			changed = true
			continue
		case len(f) >= 2 && f[0] == "search":
			kept := slices.DeleteFunc(slices.Clone(f[1:]), func(d string) bool { return strings.TrimSuffix(d, ".") == strings.TrimSuffix(domain, ".") })
			if len(kept) != len(f)-1 {
				changed = true
				if len(kept) == 0 {
					continue
				}
				line = "search " + strings.Join(kept, " ")
			}
		}
		out.WriteString(line + "\n")
	}
	return out.Bytes(), changed
}

// Under joins a node path to the root it is installed under.
func Under(root, path string) string { return filepath.Join(root, path) }
