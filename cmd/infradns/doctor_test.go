package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDoctorChecks(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("198.51.100.11"), netip.MustParseAddr("127.0.0.1")}
	for _, tc := range []struct {
		name, text string
		check      func([]byte, []netip.Addr) finding
		want       string
	}{
		{"resolv: this node first", "search ocp4.example.com\nnameserver 198.51.100.11\nnameserver 198.51.100.53\n", checkResolv, pass},
		{"resolv: loopback first", "nameserver 127.0.0.1\n", checkResolv, pass},
		{"resolv: site DNS first", "nameserver 198.51.100.53\nnameserver 198.51.100.11\n", checkResolv, fail},
		{"resolv: none", "# empty\n", checkResolv, fail},
		{"forward: site servers", ". 198.51.100.53 198.51.100.54:53\n", checkForward, pass},
		{"forward: this node", "198.51.100.53 198.51.100.11\n", checkForward, fail},
		{"forward: loopback", "127.0.0.53\n", checkForward, fail},
		{"forward: missing", "", checkForward, fail},
		{"forward: no address", "# nothing\n", checkForward, fail},
	} {
		if got := tc.check([]byte(tc.text), local); got.Verdict != tc.want || (got.Verdict != pass && got.Fix == "") {
			t.Errorf("%s: %+v, want %s with a fix", tc.name, got, tc.want)
		}
	}
}

func TestDoctorSecretMode(t *testing.T) {
	for _, tc := range []struct {
		perm uint32
		gid  uint32
		want string
	}{
		{0o640, podGID, pass},
		{0o600, podGID, pass},
		{0o644, podGID, fail},
		{0o660, podGID, fail},
		{0o640, 0, warn},
		{0o600, 0, warn},
	} {
		if got := secretMode("key", "/etc/infradns/mdns.key", os.FileMode(tc.perm), tc.gid, "fix"); got.Verdict != tc.want {
			t.Errorf("%04o gid %d: %+v, want %s", tc.perm, tc.gid, got, tc.want)
		}
	}
}

// TestDoctorKubeconfigRefs: a kubeconfig naming files outside its
// directory fails: the pods mount only that directory.
func TestDoctorKubeconfigRefs(t *testing.T) {
	const kc = `apiVersion: v1
kind: Config
current-context: c
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", certificate-authority: %s}}]
users: [{name: u, user: {client-certificate: %s, client-key: %s}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
`
	for _, tc := range []struct {
		ca, cert, want string
	}{
		{"ca.crt", "client.pem", pass},
		{"/etc/kubernetes/infradns/ca.crt", "pki/client.pem", pass},
		{"/etc/kubernetes/pki/ca.crt", "client.pem", fail},
		{"ca.crt", "/var/lib/kubelet/pki/kubelet-client-current.pem", fail},
		{"ca.crt", "../pki/client.pem", fail},
	} {
		got := checkKubeconfigRefs("/etc/kubernetes/infradns/kubeconfig", []byte(fmt.Sprintf(kc, tc.ca, tc.cert, tc.cert)))
		if got.Verdict != tc.want || (got.Verdict != pass && got.Fix == "") {
			t.Errorf("%s, %s: %+v, want %s with a fix", tc.ca, tc.cert, got, tc.want)
		}
	}
}

// TestDoctorBGPPasswordFile: doctor judges a peer's password file as
// lbconfig will at its start.
func TestDoctorBGPPasswordFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		content string
		perm    os.FileMode
		want    string
	}{
		{"Pw0rdX\n", 0o600, pass},
		{"Pw0rdX\n", 0o644, fail},
		{"Pw\u00a00rdX\n", 0o600, fail},
		{"Pw\v0rdX", 0o600, fail},
		{"", 0o600, fail},
	} {
		p := filepath.Join(dir, "tor.password")
		if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tc.perm); err != nil {
			t.Fatal(err)
		}
		got := checkBGPPasswordFile("192.0.2.1", "/etc/infradns-bgp/tor.password", p)
		if got.Verdict != tc.want || (got.Verdict != pass && got.Fix == "") || strings.Contains(got.Detail, "0rdX") {
			t.Errorf("%q %04o: %+v, want %s with a fix and no password", tc.content, tc.perm, got, tc.want)
		}
	}
	if got := checkBGPPasswordFile("192.0.2.1", "/x", filepath.Join(dir, "missing")); got.Verdict != fail {
		t.Errorf("missing file: %+v", got)
	}
}
