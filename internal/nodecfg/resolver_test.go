package nodecfg

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/infradns/infradns/deploy"
)

// resolvedFile is the shipped example in systemd-resolved mode: CoreDNS
// bound to the cluster interface and loopback, beside resolved's stub.
func resolvedFile(t *testing.T) File {
	t.Helper()
	f := exampleFile(t)
	f.Role, f.Node = Worker, "worker-0"
	f.Resolver, f.lines["resolver"] = ResolverSystemdResolved, 100
	f.Listen, f.lines["listen"] = []string{"ens3", "lo"}, 101
	return f
}

// TestResolverModes: which files each resolver mode installs. The
// NetworkManager mode is the dispatcher script; the systemd-resolved mode
// is the same script run by a unit, and neither the dispatcher nor
// anything that touches /etc/resolv.conf.
func TestResolverModes(t *testing.T) {
	nm := []string{DispatcherPath}
	resolved := []string{ResolverScript, ResolverService, ResolverPath}
	for _, tc := range []struct {
		name, resolver string
		listen         []string
		want, notWant  []string
		env            string
	}{
		{"default", "", nil, nm, resolved, "INFRADNS_RESOLVER=networkmanager\n"},
		{"networkmanager", ResolverNetworkManager, nil, nm, resolved, "INFRADNS_RESOLVER=networkmanager\n"},
		{"networkmanager with listen", ResolverNetworkManager, []string{"ens3", "lo"}, nm, resolved, "INFRADNS_RESOLVER=networkmanager\n"},
		{"systemd-resolved", ResolverSystemdResolved, []string{"ens3", "lo"}, resolved, nm, "INFRADNS_RESOLVER=systemd-resolved\n"},
		{"systemd-resolved on an address", ResolverSystemdResolved, []string{"192.0.2.21"}, resolved, nm, "INFRADNS_RESOLVER=systemd-resolved\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := exampleFile(t)
			f.Role = Worker
			if tc.resolver != "" {
				f.Resolver, f.lines["resolver"] = tc.resolver, 100
			}
			f.Listen = tc.listen
			got := render(t, f)
			for _, p := range tc.want {
				if _, ok := got[p]; !ok {
					t.Errorf("%s not rendered", p)
				}
			}
			for _, p := range tc.notWant {
				if _, ok := got[p]; ok {
					t.Errorf("%s rendered", p)
				}
			}
			for p := range got {
				if p == "/etc/resolv.conf" || p == KubeletResolv || p == ResolvedDropIn {
					t.Errorf("%s rendered: the script writes it from the node's address", p)
				}
			}
			for _, p := range []string{DispatcherPath, ResolverScript} {
				if o, ok := got[p]; ok && (o.Mode != 0o755 || !bytes.Equal(o.Data, deploy.Dispatcher)) {
					t.Errorf("%s: mode %v, %d bytes: want the shipped script, 0755", p, o.Mode, len(o.Data))
				}
			}
			if env := string(got[ResolvEnv].Data); !strings.Contains(env, tc.env) {
				t.Errorf("resolv.env lacks %q:\n%s", tc.env, env)
			}
		})
	}
}

// TestRenderResolved compares the systemd-resolved mode's files with
// testdata/systemd-resolved (go test -update rewrites them).
func TestRenderResolved(t *testing.T) {
	got := render(t, resolvedFile(t))
	if !strings.Contains(string(got[Corefile].Data), "\n    bind ens3 lo 192.0.2.5 2001:db8::5\n") {
		t.Errorf("Corefile does not bind ens3, lo and the API VIPs ahead:\n%s", got[Corefile].Data)
	}
	svc := string(got[ResolverService].Data)
	for _, s := range []string{"\nExecStart=" + ResolverScript + "\n", "\nType=oneshot\n", "\nBefore=kubelet.service\n"} {
		if !strings.Contains(svc, s) {
			t.Errorf("%s lacks %q:\n%s", ResolverService, s, svc)
		}
	}
	path := string(got[ResolverPath].Data)
	for _, s := range []string{"\nPathChanged=" + ResolvedUpstreams + "\n", "\nPathChanged=" + ResolvEnv + "\n", "\nUnit=infradns-resolver.service\n"} {
		if !strings.Contains(path, s) {
			t.Errorf("%s lacks %q:\n%s", ResolverPath, s, path)
		}
	}
	golden(t, filepath.Join("testdata", "systemd-resolved"), got)
}

// TestResolverSwitch: rendering a NetworkManager node again in
// systemd-resolved mode removes the dispatcher script, and back again
// removes the units and the script.
func TestResolverSwitch(t *testing.T) {
	root := t.TempDir()
	install := func(f File) []Change {
		t.Helper()
		changes, err := Plan(root, renderList(t, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := Install(changes, func(p string, b []byte, m os.FileMode) (bool, error) { return true, os.WriteFile(p, b, m) }); err != nil {
			t.Fatal(err)
		}
		return changes
	}
	removed := func(changes []Change) []string {
		var out []string
		for _, c := range changes {
			if c.Action == Remove {
				out = append(out, c.Path)
			}
		}
		return out
	}
	nm := exampleFile(t)
	nm.Role = Worker
	install(nm)
	if got := removed(install(resolvedFile(t))); !slices.Equal(got, []string{DispatcherPath}) {
		t.Errorf("to systemd-resolved: removed %v, want the dispatcher script", got)
	}
	want := []string{ResolverPath, ResolverService, ResolverScript}
	slices.Sort(want)
	if got := removed(install(nm)); !slices.Equal(got, want) {
		t.Errorf("back to networkmanager: removed %v, want %v", got, want)
	}
}

// TestResolverUnitsVerify runs systemd's own unit parser over the two
// units, in a root that holds them, the script they run and the targets
// they name: no unknown key, no relative path, an executable ExecStart.
func TestResolverUnitsVerify(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatalf("systemd-analyze not found (Debian package systemd; run hack/install-deps.sh as root): %v", err)
	}
	root := t.TempDir()
	changes, err := Plan(root, renderList(t, resolvedFile(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := Install(changes, func(p string, b []byte, m os.FileMode) (bool, error) { return true, os.WriteFile(p, b, m) }); err != nil {
		t.Fatal(err)
	}
	// What DefaultDependencies, After/Before and WantedBy name, as stubs:
	// the root has no systemd of its own.
	for _, u := range []string{"sysinit.target", "basic.target", "shutdown.target", "network-online.target", "multi-user.target", "paths.target"} {
		if err := os.WriteFile(filepath.Join(root, "etc/systemd/system", u), []byte("[Unit]\nDescription=stub\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	verify := func(units ...string) (string, error) {
		args := []string{"verify", "--root=" + root, "--man=no", "--generators=no"}
		for _, u := range units {
			args = append(args, filepath.Join(root, u))
		}
		cmd := exec.Command("systemd-analyze", args...)
		cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := verify(ResolverService, ResolverPath); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The check itself: a misspelt key is reported.
	bad := filepath.Join(root, "etc/systemd/system/bad.service")
	svc, _ := os.ReadFile(filepath.Join(root, ResolverService))
	if err := os.WriteFile(bad, bytes.Replace(svc, []byte("Type=oneshot"), []byte("Tpye=oneshot"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _ := verify("/etc/systemd/system/bad.service"); !strings.Contains(out, "Unknown key 'Tpye'") {
		t.Errorf("systemd-analyze verify did not report a misspelt key:\n%s", out)
	}
}
