package mdnsnodes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/fall"
)

func TestParse(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		keys      []string
		input     string
		shouldErr bool
		errText   string

		zones   []string
		cluster string
		iface   string
		bind    string
		service string
		ttl     uint32
		fall    fall.F
		key     string
		kube    string
		names   string
	}{
		{name: "minimal", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n}",
			zones: []string{"ocp4.example.com."}, iface: "eth0", service: "_workstation._tcp", ttl: 30},
		{name: "all options", keys: []string{"."}, input: `mdnsnodes {
			zone OCP4.example.com
			cluster ocp4
			bind 198.51.100.11
			service _Workstation._tcp
			key ` + keyFile + `
			ttl 5
			fallthrough
		}`, zones: []string{"ocp4.example.com."}, cluster: "ocp4", bind: "198.51.100.11", service: "_workstation._tcp", ttl: 5, fall: fall.Root, key: keyFile},
		{name: "ipv6 bind", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n bind 2001:db8:1::11\n}",
			zones: []string{"ocp4.example.com."}, bind: "2001:db8:1::11", service: "_workstation._tcp", ttl: 30},

		{name: "kubeconfig and interface", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n kubeconfig /etc/kubernetes/kubeconfig\n}",
			zones: []string{"ocp4.example.com."}, iface: "eth0", service: "_workstation._tcp", ttl: 30, kube: "/etc/kubernetes/kubeconfig"},
		// The file may appear after start (bootstrap): it is not checked here.
		{name: "kubeconfig alone: the API without mDNS", keys: []string{"."}, input: "mdnsnodes {\n zone ocp4.example.com\n kubeconfig /nonexistent/kubeconfig\n}",
			zones: []string{"ocp4.example.com."}, service: "_workstation._tcp", ttl: 30, kube: "/nonexistent/kubeconfig"},

		{name: "nodes-service", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n kubeconfig /k\n nodes-service kube-system/infradns-nodes\n}",
			zones: []string{"ocp4.example.com."}, service: "_workstation._tcp", ttl: 30, kube: "/k", names: "kube-system/infradns-nodes"},
		{name: "nodes-service without kubeconfig", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n nodes-service kube-system/infradns-nodes\n}", shouldErr: true, errText: "nodes-service needs kubeconfig"},
		{name: "nodes-service not namespace/name", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n kubeconfig /k\n nodes-service infradns-nodes\n}", shouldErr: true, errText: `nodes-service: "infradns-nodes" is not NAMESPACE/NAME`},
		{name: "no link", keys: []string{"ocp4.example.com."}, input: "mdnsnodes", shouldErr: true, errText: "'interface NAME' or 'bind ADDRESS' is required"},
		{name: "both links", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n bind 198.51.100.11\n}", shouldErr: true, errText: "not both"},
		{name: "arguments", keys: []string{"ocp4.example.com."}, input: "mdnsnodes ocp4.example.com {\n interface eth0\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "twice", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n}\nmdnsnodes {\n interface eth0\n}", shouldErr: true, errText: "Testfile:4 - Error during parsing: this plugin can only be used once per Server Block"},
		{name: "root without zone", keys: []string{"."}, input: "mdnsnodes {\n interface eth0\n}", shouldErr: true, errText: "needs the 'zone DOMAIN' option"},
		{name: "zone not a host name", keys: []string{"."}, input: "mdnsnodes {\n zone a;b.example.com\n interface eth0\n}", shouldErr: true, errText: `invalid zone "a;b.example.com": label "a;b" has ';'`},
		{name: "bad bind", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n bind 224.0.0.251\n}", shouldErr: true, errText: "invalid bind address"},
		{name: "bad service", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n service workstation\n}", shouldErr: true, errText: "invalid service type"},
		{name: "bad cluster", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n cluster a=b\n}", shouldErr: true, errText: "invalid cluster"},
		{name: "missing key", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n key /nonexistent/key\n}", shouldErr: true, errText: "key file"},
		{name: "ttl too big", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n ttl 4000\n}", shouldErr: true, errText: "ttl must be in range"},
		{name: "unknown", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n foo\n}", shouldErr: true, errText: "unknown property 'foo'"},
		{name: "kubeconfig without path", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0\n kubeconfig\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "kubeconfig two paths", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n kubeconfig /a /b\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "no link nor kubeconfig", keys: []string{"."}, input: "mdnsnodes {\n zone ocp4.example.com\n ttl 5\n}", shouldErr: true, errText: "or 'kubeconfig PATH'"},
		{name: "interface two args", keys: []string{"ocp4.example.com."}, input: "mdnsnodes {\n interface eth0 eth1\n}", shouldErr: true, errText: "Wrong argument count"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = tc.keys
			m, err := parse(c)
			if tc.shouldErr {
				if err == nil || !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("Error %v, want one containing %q", err, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unexpected error: %v", err)
			}
			bind := ""
			if m.bind.IsValid() {
				bind = m.bind.String()
			}
			if !slices.Equal(m.Zones, tc.zones) || m.cluster != tc.cluster || m.iface != tc.iface || bind != tc.bind ||
				m.service != tc.service || m.ttl != tc.ttl || !m.Fall.Equal(tc.fall) || m.keyFile != tc.key || m.kubeconfig != tc.kube || m.namesService != tc.names {
				t.Errorf("Got zones %v cluster %q iface %q bind %q service %q ttl %d fall %v key %q kubeconfig %q nodes-service %q",
					m.Zones, m.cluster, m.iface, bind, m.service, m.ttl, m.Fall, m.keyFile, m.kubeconfig, m.namesService)
			}
		})
	}
}

// TestParseRepeatedOption: an option given twice in the block is an error at
// the second use that names the option and the line of the first, never "the
// last one wins".
func TestParseRepeatedOption(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input string
		err   string // the whole error of parse
	}{
		{name: "zone", input: "mdnsnodes {\n zone a.example.com\n interface eth0\n zone b.example.com\n}",
			err: "Testfile:4 - Error during parsing: zone: used more than once (first on line 2)"},
		{name: "cluster", input: "mdnsnodes {\n cluster ocp4\n cluster ocp5\n interface eth0\n}",
			err: "Testfile:3 - Error during parsing: cluster: used more than once (first on line 2)"},
		{name: "interface", input: "mdnsnodes {\n interface eth0\n\n interface eth1\n}",
			err: "Testfile:4 - Error during parsing: interface: used more than once (first on line 2)"},
		{name: "bind", input: "mdnsnodes {\n bind 198.51.100.11\n bind 2001:db8:1::11\n}",
			err: "Testfile:3 - Error during parsing: bind: used more than once (first on line 2)"},
		{name: "service", input: "mdnsnodes {\n interface eth0\n service _workstation._tcp\n service _http._tcp\n}",
			err: "Testfile:4 - Error during parsing: service: used more than once (first on line 3)"},
		{name: "key", input: "mdnsnodes {\n interface eth0\n key " + keyFile + "\n key " + keyFile + "\n}",
			err: "Testfile:4 - Error during parsing: key: used more than once (first on line 3)"},
		{name: "ttl", input: "mdnsnodes {\n ttl 5\n interface eth0\n ttl 60\n}",
			err: "Testfile:4 - Error during parsing: ttl: used more than once (first on line 2)"},
		{name: "kubeconfig", input: "mdnsnodes {\n kubeconfig /a\n kubeconfig /b\n}",
			err: "Testfile:3 - Error during parsing: kubeconfig: used more than once (first on line 2)"},
		{name: "fallthrough", input: "mdnsnodes {\n interface eth0\n fallthrough a.example.com\n\n\n fallthrough\n}",
			err: "Testfile:6 - Error during parsing: fallthrough: used more than once (first on line 3)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = []string{"example.com."}
			if _, err := parse(c); err == nil || err.Error() != tc.err {
				t.Fatalf("Error %v, want %q", err, tc.err)
			}
		})
	}
}

func TestStartBadKey(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := caddy.NewTestController("dns", "mdnsnodes {\n bind 198.51.100.11\n key "+keyFile+"\n}")
	c.ServerBlockKeys = []string{"ocp4.example.com."}
	m, err := parse(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(); err == nil {
		m.Stop()
		t.Fatal("Start with a 5-byte key succeeded")
	}
	m.Stop() // before or without Start: a no-op
}

// TestStartKeyMode checks that a key file group or others may write stops
// the plugin at startup with an error that says how to fix it.
func TestStartKeyMode(t *testing.T) {
	tests := []struct {
		name    string
		mode    os.FileMode
		wantErr string
	}{
		{"group may write", 0o660, "chmod 0640"},
		{"anyone may write", 0o646, "chown root:65532"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keyFile := filepath.Join(t.TempDir(), "key")
			if err := os.WriteFile(keyFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(keyFile, tc.mode); err != nil {
				t.Fatal(err)
			}
			c := caddy.NewTestController("dns", "mdnsnodes {\n bind 198.51.100.11\n key "+keyFile+"\n}")
			c.ServerBlockKeys = []string{"ocp4.example.com."}
			m, err := parse(c)
			if err != nil {
				t.Fatal(err)
			}
			err = m.Start()
			m.Stop()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "writable by group or others") {
				t.Fatalf("Start with a key file of mode %04o: %v, want an error that says %q", tc.mode, err, tc.wantErr)
			}
		})
	}
}
