package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/infradns/infradns/internal/mdns"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// openshiftConfig is the file OpenShift's machine-config-operator rendered for
// its mdns-publisher, in YAML.
const openshiftConfig = `bind_address: 198.51.100.11
collision_avoidance: hostname
services:
  - name: ocp4 Workstation
    host_name: master-0.local.
    type: _workstation._tcp
    domain: local.
    port: 42424
    ttl: 3200
`

func write(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFile(t *testing.T) {
	file, err := loadConfig(write(t, "config.yaml", openshiftConfig))
	if err != nil {
		t.Fatal(err)
	}
	o := merge(file, options{hostname: "master-0.example.com", collision: mdns.CollisionInaction, ttl: mdns.HostTTL}, map[string]bool{})
	cfg, err := o.responderConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Bind.String() != "198.51.100.11" || cfg.Host != "master-0" || cfg.Collision != mdns.CollisionHostname || cfg.HostTTL != mdns.HostTTL {
		t.Errorf("Config %+v", cfg)
	}
	want := mdns.Service{Instance: "ocp4 Workstation", Type: "_workstation._tcp", Domain: "local.", Host: "master-0.local.", Port: 42424, TTL: 3200}
	if len(cfg.Services) != 1 || cfg.Services[0] != want {
		t.Errorf("Services %+v, want %+v", cfg.Services, want)
	}
	r, err := mdns.NewResponder(cfg)
	if err != nil || r == nil {
		t.Fatalf("NewResponder: %v", err)
	}
}

func TestFlagsWin(t *testing.T) {
	file := fileConfig{BindAddress: "198.51.100.11", Cluster: "a", CollisionAvoidance: "hostname"}
	o := merge(file, options{cluster: "b", iface: "eth0", collision: "inaction", ttl: 60}, map[string]bool{"cluster": true, "interface": true, "ttl": true})
	if o.cluster != "b" || o.iface != "eth0" || o.bind != "198.51.100.11" || o.collision != "hostname" || o.ttl != 60 {
		t.Errorf("Merged %+v", o)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"unknown key", "bind_adress: 198.51.100.1\n", "bind_adress"},
		{"bad address", "bind_address: nope\n", "bind address"},
		{"no interface", "cluster: x\n", "required"},
		{"bad collision", "bind_address: 198.51.100.1\ncollision_avoidance: rename\n", "collision"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := func() error {
				file, err := loadConfig(write(t, "c.yaml", tc.body))
				if err != nil {
					return err
				}
				cfg, err := merge(file, options{hostname: "n1", ttl: 120}, nil).responderConfig()
				if err != nil {
					return err
				}
				_, err = mdns.NewResponder(cfg)
				return err
			}()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}

func TestKeyFile(t *testing.T) {
	o := options{hostname: "n1", iface: "eth0", ttl: 120, keyFile: write(t, "key", "short\n")}
	if _, err := o.responderConfig(); err == nil {
		t.Error("A 5-byte key is accepted")
	}
	o.keyFile = write(t, "key", "0123456789abcdef0123\n")
	cfg, err := o.responderConfig()
	if err != nil || string(cfg.Key) != "0123456789abcdef0123" {
		t.Errorf("Key %q, %v", cfg.Key, err)
	}
}

// TestKeyFileMode checks that the publisher refuses a key that group or
// others may write, saying how to fix it, and warns about one others may read.
func TestKeyFileMode(t *testing.T) {
	tests := []struct {
		name    string
		mode    os.FileMode
		wantErr string
		warn    bool
	}{
		{"owner only", 0o600, "", false},
		{"publisher's group may read", 0o640, "", false},
		{"others may read", 0o644, "", true},
		{"group may write", 0o660, "chown root:65532", false},
		{"anyone may write", 0o666, "chmod 0640", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := write(t, "key", "0123456789abcdef0123\n")
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			var warnings []string
			o := options{hostname: "n1", iface: "eth0", ttl: 120, keyFile: p, warn: func(s string) { warnings = append(warnings, s) }}
			_, err := o.responderConfig()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Key file mode %04o: %v", tc.mode, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Key file mode %04o: error %v, want one that says %q", tc.mode, err, tc.wantErr)
			}
			if (len(warnings) > 0) != tc.warn {
				t.Errorf("Key file mode %04o: warnings %q, want a warning %v", tc.mode, warnings, tc.warn)
			}
		})
	}
}

func TestRunFlagErrors(t *testing.T) {
	for _, args := range [][]string{{"--ttl", "0"}, {"extra"}, {"--hostname", "n1"}, {"--no-such-flag"}} {
		if err := run(args); err == nil {
			t.Errorf("run(%v) = nil, want an error", args)
		}
	}
}

// TestHelpIsNoError: -h reaches main as flag.ErrHelp, which exits 0.
func TestHelpIsNoError(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}} {
		if err := run(args); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("run(%v) = %v, want flag.ErrHelp", args, err)
		}
	}
}

func TestMetricNaming(t *testing.T) {
	reg := prometheus.NewRegistry()
	newMetrics(reg)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("Metric %s: %s", p.Metric, p.Text)
	}
}

func TestExcludeAddresses(t *testing.T) {
	file, err := loadConfig(write(t, "c.yaml", "interface: eth0\nexclude_addresses: [198.51.100.120]\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags options
		set   map[string]bool
		want  string
	}{
		{"file", options{hostname: "n1", ttl: 120}, nil, "[198.51.100.120]"},
		{"flags win", options{hostname: "n1", ttl: 120, exclude: []string{"198.51.100.121", "2001:db8::121"}},
			map[string]bool{"exclude-address": true}, "[198.51.100.121 2001:db8::121]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := merge(file, tc.flags, tc.set).responderConfig()
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(cfg.Exclude); got != tc.want {
				t.Errorf("Exclude %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := merge(file, options{hostname: "n1", ttl: 120, exclude: []string{"vip"}}, map[string]bool{"exclude-address": true}).responderConfig(); err == nil {
		t.Error("a bad exclude address is accepted")
	}
}
