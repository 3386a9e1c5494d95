package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const example = "../../deploy/cluster.example.yaml"

func TestVRIDs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		// runtimecfg vr-ids prints these two for oc2-yw674 and ocp4.
		{[]string{"oc2-yw674"}, "APIVirtualRouterID: 1\nIngressVirtualRouterID: 223\n"},
		{[]string{"ocp4"}, "APIVirtualRouterID: 222\nIngressVirtualRouterID: 61\n"},
		{[]string{"ocp4", "-ingress-vips", "3"}, "APIVirtualRouterID: 222\nIngressVirtualRouterID: 61\nIngress2VirtualRouterID: 35\nIngress3VirtualRouterID: 52\n"},
		{[]string{"-f", example}, "APIVirtualRouterID: 222\nIngressVirtualRouterID: 61\n"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"vr-ids"}, tc.args...), &out); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if out.String() != tc.want {
			t.Errorf("vr-ids %v = %q, want %q", tc.args, out.String(), tc.want)
		}
	}
	for _, args := range [][]string{{}, {"a", "b"}, {"-f", example, "ocp4"}, {"a.b"}, {"ocp4", "-ingress-vips", "0"}} {
		if err := run(context.Background(), append([]string{"vr-ids"}, args...), &bytes.Buffer{}); err == nil {
			t.Errorf("vr-ids %v accepted", args)
		}
	}
}

// TestHelp: -h and help print the usage and succeed; a subcommand's -h
// prints its flags, never runs it (vr-ids -h once printed the IDs of a
// cluster named "-h").
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err != nil || !strings.Contains(out.String(), "render-node -f CLUSTER.yaml") {
			t.Errorf("%v: %v\n%s", args, err, out.String())
		}
	}
	for _, args := range [][]string{{"version"}, {"-version"}, {"--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out); err != nil || strings.TrimSpace(out.String()) != version {
			t.Errorf("%v: %v, %q", args, err, out.String())
		}
	}
	for _, cmd := range []string{"vr-ids", "render", "render-node", "vrrp-scan", "status"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{cmd, "-h"}, &out); err != nil || out.Len() != 0 {
			t.Errorf("%s -h: %v, stdout %q", cmd, err, out.String())
		}
	}
}

// stderrOf runs f with os.Stderr sent to a file (a subcommand's flag set
// prints its usage and errors there) and returns what f wrote.
func stderrOf(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	old := os.Stderr
	os.Stderr = file
	defer func() { os.Stderr = old }()
	f()
	b, err := os.ReadFile(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSubcommandFlags: every subcommand, version included (it printed the
// version for -h, --help and any unknown flag), prints its usage on -h and
// --help and succeeds without running, and refuses an unknown flag with its
// usage. The subcommands come from the command table, so a new one is
// covered the day it is added.
func TestSubcommandFlags(t *testing.T) {
	names := slices.Sorted(maps.Keys(commands))
	for _, cmd := range names {
		for _, tc := range []struct {
			flag    string
			wantErr string // "": success
		}{
			{"-h", ""},
			{"--help", ""},
			{"-no-such-flag", "flag provided but not defined: -no-such-flag"},
		} {
			t.Run(cmd+" "+tc.flag, func(t *testing.T) {
				var out bytes.Buffer
				var err error
				stderr := stderrOf(t, func() { err = run(context.Background(), []string{cmd, tc.flag}, &out) })
				switch {
				case tc.wantErr == "" && err != nil:
					t.Errorf("error %v, want success", err)
				case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
					t.Errorf("error %v, want %q", err, tc.wantErr)
				}
				if out.Len() != 0 {
					t.Errorf("stdout %q, want nothing: the command must not run", out.String())
				}
				if !strings.Contains(stderr, "usage: infradns "+cmd) {
					t.Errorf("stderr %q, want the usage of %s", stderr, cmd)
				}
			})
		}
	}
	// version with an argument: refused too, not ignored.
	if err := run(context.Background(), []string{"version", "extra"}, &bytes.Buffer{}); err == nil {
		t.Error("version extra: accepted")
	}
}

// TestRender: render reads the one cluster file, as render-node does, and
// writes what lbconfig starts with on a control-plane node: the API VIP
// over the file's apiServers.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	k, h := filepath.Join(dir, "keepalived.conf"), filepath.Join(dir, "haproxy.cfg")
	err := run(context.Background(), []string{"render", "-f", example, "-role", "control-plane", "-node", "master-0", "-keepalived", k, "-haproxy", h}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	for file, wants := range map[string][]string{
		k: {"router_id master-0", "vrrp_instance ocp4_api_v4 {", "vrrp_instance ocp4_api_v6 {", "virtual_router_id 222",
			"interface ens3", `file "/run/infradns/track/ocp4-api.health"`, "192.0.2.5/32", "2001:db8::5/128"},
		h: {"server addr_198-51-100-11_v4 198.51.100.11:6443", "server addr_198-51-100-13_v4 198.51.100.13:6443", "bind :::9445 v4v6"},
	} {
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(string(got), w) {
				t.Errorf("%s lacks %q:\n%s", file, w, got)
			}
		}
		if strings.Contains(string(got), "ingress") {
			t.Errorf("%s names an ingress VIP before the API lists a router:\n%s", file, got)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"render", "-f", example, "-node", "master-0"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "vrrp_instance ocp4_api_v4") || !strings.Contains(out.String(), "backend ocp4_api") {
		t.Errorf("Stdout lacks one of the two files:\n%s", out.String())
	}
	err = run(context.Background(), []string{"render", "-f", example, "-role", "worker", "-node", "w"}, &out)
	if err == nil || !strings.Contains(err.Error(), "a worker renders nothing") {
		t.Errorf("worker: %v", err)
	}
}

// TestRenderOutputPaths: render writes regular files, or stdout for "-";
// an existing target of another kind is refused before anything is
// written. Before, -haproxy /dev/null as root renamed a regular file over
// the device and -keepalived /dev/stdout into a pipe hung. Stand-ins in a
// temporary directory (a twin of /dev/null, a pipe nobody writes to, a
// symlink) keep a regression away from the machine's own /dev.
func TestRenderOutputPaths(t *testing.T) {
	dir := t.TempDir()
	null := filepath.Join(dir, "null")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatalf("mknod (the test needs root): %v", err)
	}
	fifo := filepath.Join(dir, "stdout")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(null, link); err != nil {
		t.Fatal(err)
	}
	k := filepath.Join(dir, "keepalived.conf")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-keepalived", k, "-haproxy", null}, null + " is a character device, not a regular file"},
		{[]string{"-keepalived", fifo, "-haproxy", "-"}, fifo + " is a named pipe, not a regular file"},
		{[]string{"-keepalived", link}, link + " is a symlink, not a regular file"},
		{[]string{"-haproxy", ""}, "an empty output path"},
	} {
		done := make(chan error, 1)
		go func() {
			done <- run(context.Background(), append([]string{"render", "-f", example, "-node", "master-0"}, tc.args...), &bytes.Buffer{})
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				_ = w.Close() // a reader blocked on the pipe: let it go
			}
			<-done
			t.Errorf("%v: hung", tc.args)
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	for p, typ := range map[string]os.FileMode{null: os.ModeDevice | os.ModeCharDevice, fifo: os.ModeNamedPipe, link: os.ModeSymlink} {
		if fi, err := os.Lstat(p); err != nil || fi.Mode().Type() != typ {
			t.Errorf("%s: now %v (%v), want it left alone", p, fi.Mode(), err)
		}
	}
	if _, err := os.Stat(k); err == nil {
		t.Errorf("%s written although the other output was refused", k)
	}
	// "-" is stdout, for either file.
	var out bytes.Buffer
	if err := run(context.Background(), []string{"render", "-f", example, "-node", "master-0", "-keepalived", "-", "-haproxy", k}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "vrrp_instance ocp4_api_v4") || strings.Contains(out.String(), "backend ocp4_api") {
		t.Errorf("stdout should hold keepalived.conf only:\n%s", out.String())
	}
	if b, err := os.ReadFile(k); err != nil || !strings.Contains(string(b), "backend ocp4_api") {
		t.Errorf("%s: %v\n%s", k, err, b)
	}
}

func TestScanFlags(t *testing.T) {
	for _, args := range [][]string{
		{"vrrp-scan", "-cluster", "ocp4"},                                   // no interface
		{"vrrp-scan", "-interface", "eth0"},                                 // no cluster
		{"vrrp-scan", "-interface", "eth0", "-cluster", "a", "-f", example}, // both
		{"nosuch"},
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }

// TestRenderNode renders every role from the one example file, prints the
// paths it wrote under -o, and is safe to run again.
func TestRenderNode(t *testing.T) {
	root := t.TempDir()
	node := func(role, name string, extra ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"render-node", "-f", example, "-role", role, "-node", name, "-o", root}, extra...), &out)
		return out.String(), err
	}
	out, err := node("control-plane", "master-0")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"created   " + root + "/etc/kubernetes/manifests/infradns-haproxy.yaml", "created   " + root + "/etc/infradns/Corefile"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, err = node("control-plane", "master-0"); err != nil || strings.Contains(out, "created") || strings.Contains(out, "updated") {
		t.Errorf("a second render changed files (%v):\n%s", err, out)
	}
	if !strings.Contains(out, "kept      "+root+"/etc/infradns/forward.conf") {
		t.Errorf("forward.conf not kept:\n%s", out)
	}

	// The same node as a worker, first as a dry run: a diff, nothing written.
	haproxy := filepath.Join(root, "etc/kubernetes/manifests/infradns-haproxy.yaml")
	out, err = node("worker", "master-0", "-dry-run")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--- " + haproxy + "\n+++ /dev/null\n", "+        health-check api none\n", "# dry run: "} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(haproxy); err != nil {
		t.Fatalf("the dry run removed %s: %v", haproxy, err)
	}
	if out, err = node("worker", "master-0"); err != nil || !strings.Contains(out, "removed   "+haproxy) {
		t.Fatalf("worker (%v):\n%s", err, out)
	}
	if _, err := os.Stat(haproxy); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", haproxy, err)
	}
	core, err := os.ReadFile(filepath.Join(root, "etc/infradns/lbconfig.Corefile"))
	if err != nil || !strings.Contains(string(core), "node master-0") || strings.Contains(string(core), "backends") {
		t.Fatalf("worker lbconfig.Corefile (%v):\n%s", err, core)
	}

	if err := run(context.Background(), []string{"render-node", "-f", example}, &bytes.Buffer{}); err == nil {
		t.Error("render-node without -o accepted")
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := writeFile(bad, "cluster: ocp4\nDomain: x.example.com\n"); err != nil {
		t.Fatal(err)
	}
	err = run(context.Background(), []string{"render-node", "-f", bad, "-role", "worker", "-o", t.TempDir()}, &bytes.Buffer{})
	if err == nil || err.Error() != bad+`:2: unknown key "Domain" (did you mean "domain"? keys are case-sensitive)` {
		t.Errorf("bad file: %v", err)
	}
}

// TestRenderNodeMachineConfig: -format machineconfig and butane write one
// document for the role's pool; a bootstrap node and an unknown format are
// refused.
func TestRenderNodeMachineConfig(t *testing.T) {
	for format, want := range map[string]string{"machineconfig": "kind: MachineConfig", "butane": "variant: openshift"} {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"render-node", "-f", example, "-role", "control-plane", "-format", format, "-o", "-"}, &out); err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if s := out.String(); !strings.Contains(s, want) || !strings.Contains(s, "name: 50-master-infradns") {
			t.Errorf("%s output:\n%.400s", format, s)
		}
		path := filepath.Join(t.TempDir(), "mc.yaml")
		if err := run(context.Background(), []string{"render-node", "-f", example, "-role", "worker", "-format", format, "-o", path}, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(path); err != nil || !strings.Contains(string(b), "50-worker-infradns") {
			t.Errorf("%s file: %v\n%.200s", format, err, b)
		}
	}
	for _, args := range [][]string{{"-role", "bootstrap", "-format", "machineconfig"}, {"-role", "worker", "-format", "ignition"}} {
		if err := run(context.Background(), append([]string{"render-node", "-f", example, "-o", "-"}, args...), &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestRenderNodeBGPSecret: a BGP password never leaves its file on the
// node. With passwordFile, no output of render-node (the files, -dry-run's
// diff, the MachineConfig and Butane config, which hold every file in
// base64 or inline) holds the password, even where the file is under -o;
// an inline password is refused without being echoed and nothing is
// written. Before, it was written into lbconfig.Corefile (0644, where the
// DNS pod reads), the MachineConfig and the diff.
func TestRenderNodeBGPSecret(t *testing.T) {
	const pw = "Sup3rS3cretPw"
	base, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	bgp := "\nvipMode: bgp\nbgp:\n  asn: 64513\n  peers:\n" +
		"  - {address: 198.51.100.1, asn: 64512, passwordFile: /etc/infradns-bgp/tor.password}\n" +
		"  - {address: \"2001:db8:1::1\", asn: 64512, passwordFile: /etc/infradns-bgp/tor.password}\n"
	dir := t.TempDir()
	cf := filepath.Join(dir, "cluster.yaml")
	if err := writeFile(cf, string(base)+bgp); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "etc/infradns-bgp"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/infradns-bgp/tor.password"), []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var outs []string
	for _, args := range [][]string{
		{"-role", "control-plane", "-node", "master-0", "-o", root, "-dry-run"},
		{"-role", "control-plane", "-node", "master-0", "-o", root},
		{"-role", "control-plane", "-format", "machineconfig", "-o", "-"},
		{"-role", "worker", "-format", "butane", "-o", "-"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), append([]string{"render-node", "-f", cf}, args...), &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		outs = append(outs, out.String())
	}
	if !strings.Contains(outs[0], "+        bgp-peer 198.51.100.1 64512 port 179 hold 9s keepalive 3s password-file /etc/infradns-bgp/tor.password bfd 100ms 3\n") {
		t.Errorf("the dry run's diff lacks the password-file line:\n%s", outs[0])
	}
	if !strings.Contains(outs[2], "kind: MachineConfig") || !strings.Contains(outs[3], "password-file /etc/infradns-bgp/tor.password") {
		t.Errorf("the MachineConfig or Butane output is not what was asked for")
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "tor.password") {
			return err
		}
		b, err := os.ReadFile(p)
		outs = append(outs, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if strings.Contains(o, pw) || strings.Contains(o, base64.StdEncoding.EncodeToString([]byte(pw))[:12]) {
			t.Errorf("output %d holds the password:\n%s", i, o)
		}
		for _, line := range strings.Split(o, "\n") {
			// MachineConfig contents are base64: decode each to look.
			if _, b64, ok := strings.Cut(line, "base64,"); ok {
				if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64)); err != nil || strings.Contains(string(b), pw) {
					t.Errorf("a MachineConfig file holds the password (or is not base64: %v)", err)
				}
			}
		}
	}

	inline := strings.Replace(string(base)+bgp, "passwordFile: /etc/infradns-bgp/tor.password}\n  - {", "password: "+pw+"}\n  - {", 1)
	if err := writeFile(cf, inline); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, args := range [][]string{
		{"-role", "control-plane", "-node", "master-0", "-o", empty, "-dry-run"},
		{"-role", "control-plane", "-node", "master-0", "-o", empty},
		{"-role", "control-plane", "-format", "machineconfig", "-o", "-"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"render-node", "-f", cf}, args...), &out)
		if err == nil || !strings.Contains(err.Error(), "an inline password would be written into lbconfig's Corefile") || !strings.Contains(err.Error(), "passwordFile") {
			t.Errorf("%v: %v, want the inline password refused", args, err)
		}
		if strings.Contains(out.String(), pw) || err != nil && strings.Contains(err.Error(), pw) {
			t.Errorf("%v echoes the password: %v\n%s", args, err, out.String())
		}
	}
	if entries, _ := os.ReadDir(empty); len(entries) != 0 {
		t.Errorf("a refused render wrote %d entries", len(entries))
	}
}
