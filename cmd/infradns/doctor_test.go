package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/infradns/infradns/internal/nodecfg"

	"github.com/miekg/dns"
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

// dnsServer serves handle on a random UDP port of 127.0.0.1 and says where.
func dnsServer(t *testing.T, handle func(w dns.ResponseWriter, r *dns.Msg)) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The socket is bound already: a query sent before the server reads
	// waits in its buffer, so no start notification is needed.
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(handle)}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// TestDoctorAnswers: during install, a CoreDNS that does not answer at all
// is what comes next (NEXT), and checkAnswers says so with its flag, not
// with the text of a finding; one that answers, wrongly, stays a FAIL.
func TestDoctorAnswers(t *testing.T) {
	v := nodecfg.Values{Domain: "ocp4.example.com", APIVIPs: []string{"192.0.2.5"}, IngressVIPs: []string{"192.0.2.6"}}
	addrs := map[string]string{
		"api-int.ocp4.example.com.":           "192.0.2.5",
		"doctor-check.apps.ocp4.example.com.": "192.0.2.6",
		"master-0.ocp4.example.com.":          "192.0.2.10",
	}
	reply := func(w dns.ResponseWriter, r *dns.Msg, a string) {
		m := new(dns.Msg)
		m.SetReply(r)
		if q := r.Question[0]; a != "" && q.Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30}, A: net.ParseIP(a)})
		}
		_ = w.WriteMsg(m)
	}

	// Nothing listens: the port was bound, then let go, so the query is
	// refused (ICMP port unreachable).
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := pc.LocalAddr().String()
	pc.Close()
	// Something holds the port and never replies: the query times out.
	quiet, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { quiet.Close() })

	// The silent cases wait for the client's timeout, four times.
	answerTimeout = time.Second
	t.Cleanup(func() { answerTimeout = 2 * time.Second })
	var asked atomic.Int32 // the handler runs on the server's goroutines
	for _, tc := range []struct {
		name, server string
		noAnswer     bool
		// want: the verdict of every finding, outside install and during it.
		want, installing []string
	}{
		{"refused", refused, true, []string{fail}, []string{next}},
		{"silent", quiet.LocalAddr().String(), true, []string{fail}, []string{next}},
		{"right answers", dnsServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
			reply(w, r, addrs[r.Question[0].Name])
		}), false, []string{pass, pass, pass}, []string{pass, pass, pass}},
		{"NXDOMAIN", dnsServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeNameError)
			_ = w.WriteMsg(m)
		}), false, []string{fail, fail, fail}, []string{fail, fail, fail}},
		{"a wrong address", dnsServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
			reply(w, r, "198.51.100.99")
		}), false, []string{fail, fail, pass}, []string{fail, fail, pass}},
		// The first question answered, the next dropped: the finding's
		// text is the one a refusal gives, yet the server did answer.
		{"answers once, then silent", dnsServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
			if asked.Add(1) == 1 {
				reply(w, r, addrs[r.Question[0].Name])
			}
		}), false, []string{fail}, []string{fail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			verdicts := func(fs []finding) []string {
				var out []string
				for _, f := range fs {
					out = append(out, f.Verdict)
				}
				return out
			}
			asked.Store(0)
			found, noAnswer := checkAnswers(tc.server, v, "master-0.ocp4.example.com")
			if noAnswer != tc.noAnswer || !slices.Equal(verdicts(found), tc.want) {
				t.Errorf("checkAnswers: noAnswer %v, %+v; want %v, %v", noAnswer, found, tc.noAnswer, tc.want)
			}
			asked.Store(0)
			inst := coreDNSAnswers(tc.server, v, "master-0", true)
			if !slices.Equal(verdicts(inst), tc.installing) {
				t.Errorf("installing: %+v, want %v", inst, tc.installing)
			}
			if tc.noAnswer && (inst[0].Check != "CoreDNS" || inst[0].Detail != tc.server+" does not answer yet: kubelet starts the infradns-coredns pod") {
				t.Errorf("installing: %+v", inst[0])
			}
		})
	}
}

// TestDoctorRelay: doctor judges BGP mode's hand-over relay device.
func TestDoctorRelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		ifi  *net.Interface
		err  error
		want string
		says string
	}{
		{"up", &net.Interface{Name: "infradns-relay", Flags: net.FlagUp}, nil, pass, "is up"},
		{"down", &net.Interface{Name: "infradns-relay"}, nil, warn, "is down"},
		{"missing", nil, errors.New("route ip+net: no such network interface"), warn, "no infradns-relay device"},
	} {
		got := checkRelay(tc.ifi, tc.err)
		if got.Verdict != tc.want || !strings.Contains(got.Detail, tc.says) || (tc.want != pass && !strings.Contains(got.Fix, "4798")) {
			t.Errorf("%s: %+v, want %v saying %q, and the ports in the fix", tc.name, got, tc.want, tc.says)
		}
	}
}
