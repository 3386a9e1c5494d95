package main

import (
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/infradns/infradns/internal/plugintest"

	"github.com/miekg/dns"
)

// input is a Corefile held in memory.
type input struct{ body string }

func (i input) Body() []byte       { return []byte(i.body) }
func (i input) Path() string       { return "Corefile" }
func (i input) ServerType() string { return "dns" }

// startServer runs a real CoreDNS instance built from this binary's plugins and
// returns its UDP and TCP addresses.
func startServer(t *testing.T, corefile string) (udp, tcp string) {
	t.Helper()
	inst, err := caddy.Start(input{corefile})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { inst.Stop() })
	srvs := inst.Servers()
	if len(srvs) == 0 {
		t.Fatal("No server started")
	}
	return srvs[0].LocalAddr().String(), srvs[0].Addr().String()
}

// upstream is a fake site DNS on loopback that answers every A query with
// 198.51.100.53, so a test sees what reached forward.
func upstream(t *testing.T) string {
	t.Helper()
	s := dnstest.NewServer(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 198.51.100.53")
			m.Answer = []dns.RR{rr}
		}
		w.WriteMsg(m)
	})
	t.Cleanup(s.Close)
	return s.Addr
}

func exchange(t *testing.T, net, addr, name string, qtype uint16, edns uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	c := &dns.Client{Net: net, Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("Exchange %s %s over %s: %v", name, dns.TypeToString[qtype], net, err)
	}
	return r
}

func answers(r *dns.Msg) string {
	var s []string
	for _, rr := range r.Answer {
		switch x := rr.(type) {
		case *dns.A:
			s = append(s, x.A.String())
		case *dns.AAAA:
			s = append(s, x.AAAA.String())
		case *dns.SOA:
			s = append(s, "SOA "+x.Ns)
		case *dns.NS:
			s = append(s, "NS "+x.Ns)
		}
	}
	return strings.Join(s, " ")
}

func TestServerOneAuthority(t *testing.T) {
	up := upstream(t)
	for _, fallthroughOpt := range []bool{false, true} {
		name := "no fallthrough"
		opt := ""
		if fallthroughOpt {
			name, opt = "fallthrough on appswildcard", "fallthrough"
		}
		t.Run(name, func(t *testing.T) {
			// appswildcard is written first: the order of execution is the directive
			// list's, not the Corefile's.
			udp, tcp := startServer(t, `.:0 {
				appswildcard 192.0.2.10 2001:db8::10 {
					zone ocp4.example.com
					`+opt+`
				}
				apiint 192.0.2.5 2001:db8::5 {
					zone ocp4.example.com
				}
				forward . `+up+`
			}`)
			tests := []struct {
				name  string
				qtype uint16
				rcode int
				want  string
			}{
				{"api-int.ocp4.example.com.", dns.TypeA, dns.RcodeSuccess, "192.0.2.5"},
				{"api.ocp4.example.com.", dns.TypeAAAA, dns.RcodeSuccess, "2001:db8::5"},
				{"x.y.apps.ocp4.example.com.", dns.TypeA, dns.RcodeSuccess, "192.0.2.10"},
				{"apps.ocp4.example.com.", dns.TypeA, dns.RcodeSuccess, ""},
				{"www.example.org.", dns.TypeA, dns.RcodeSuccess, "198.51.100.53"},
				// The authority's own names are answered by whichever
				// member sees them first, never passed on.
				{"ocp4.example.com.", dns.TypeSOA, dns.RcodeSuccess, "SOA ns.dns.ocp4.example.com."},
				{"OCP4.example.com.", dns.TypeNS, dns.RcodeSuccess, "NS ns.dns.ocp4.example.com."},
				// Bound to the wildcard address, the server cannot tell
				// which local address the query reached: NODATA, not NXDOMAIN.
				{"ns.dns.ocp4.example.com.", dns.TypeA, dns.RcodeSuccess, ""},
				{"dns.ocp4.example.com.", dns.TypeA, dns.RcodeSuccess, ""},
				{"api.ocp4.example.com.", dns.TypeMX, dns.RcodeSuccess, ""},
			}
			if fallthroughOpt {
				tests = append(tests, struct {
					name  string
					qtype uint16
					rcode int
					want  string
				}{"bootstrap.ocp4.example.com.", dns.TypeA, dns.RcodeSuccess, "198.51.100.53"})
			} else {
				tests = append(tests, struct {
					name  string
					qtype uint16
					rcode int
					want  string
				}{"bootstrap.ocp4.example.com.", dns.TypeA, dns.RcodeNameError, ""})
			}
			for _, tc := range tests {
				for _, transport := range []struct{ net, addr string }{{"udp", udp}, {"tcp", tcp}} {
					r := exchange(t, transport.net, transport.addr, tc.name, tc.qtype, 0)
					if r.Rcode != tc.rcode || answers(r) != tc.want {
						t.Errorf("%s %s over %s: expected rcode %d answer %q, got rcode %d answer %q",
							tc.name, dns.TypeToString[tc.qtype], transport.net, tc.rcode, tc.want, r.Rcode, answers(r))
					}
					ours := strings.HasSuffix(strings.ToLower(tc.name), "ocp4.example.com.") && tc.want != "198.51.100.53"
					if ours && !r.Authoritative {
						t.Errorf("%s %s over %s: answer not authoritative", tc.name, dns.TypeToString[tc.qtype], transport.net)
					}
					if ours && len(r.Answer) == 0 {
						if len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
							t.Errorf("%s %s over %s: negative answer without the SOA: %v", tc.name, dns.TypeToString[tc.qtype], transport.net, r.Ns)
						}
					}
				}
			}
		})
	}
}

func TestServerEDNSAndTruncation(t *testing.T) {
	// 40 API addresses do not fit a 512-byte UDP reply.
	var addrs []string
	for i := 1; i <= 40; i++ {
		addrs = append(addrs, net.IPv4(192, 0, 2, byte(i)).String())
	}
	udp, tcp := startServer(t, "ocp4.example.com:0 {\n apiint "+strings.Join(addrs, " ")+"\n}")

	r := exchange(t, "udp", udp, "api-int.ocp4.example.com.", dns.TypeA, 0)
	if !r.Truncated {
		t.Errorf("Expected TC on a 512-byte UDP reply with 40 records, got %d answers", len(r.Answer))
	}
	r = exchange(t, "tcp", tcp, "api-int.ocp4.example.com.", dns.TypeA, 0)
	if r.Truncated || len(r.Answer) != 40 {
		t.Errorf("Expected all 40 records over TCP, got %d (tc=%v)", len(r.Answer), r.Truncated)
	}
	r = exchange(t, "udp", udp, "api-int.ocp4.example.com.", dns.TypeA, 4096)
	if r.Truncated || len(r.Answer) != 40 {
		t.Errorf("Expected all 40 records with EDNS 4096, got %d (tc=%v)", len(r.Answer), r.Truncated)
	}
	if opt := r.IsEdns0(); opt == nil {
		t.Error("Expected the reply to echo EDNS0")
	}
}

func TestServerBadCorefile(t *testing.T) {
	tests := []struct{ corefile, want string }{
		{".:0 {\n apiint 192.0.2.5\n}", "Corefile:2 - Error during parsing: apiint in a root ('.') server block needs the 'zone DOMAIN' option"},
		{"ocp4.example.com:0 {\n apiint 192.0.2.5 {\n  ttl 7200\n }\n}", "Corefile:3 - Error during parsing: ttl must be in range [0, 3600]: 7200"},
		{"ocp4.example.com:0 {\n appswildcard 192.0.2.x\n}", `Corefile:2 - Error during parsing: invalid address "192.0.2.x"`},
		{"ocp4.example.com:0 {\n appswildcard 192.0.2.10 {\n  colour blue\n }\n}", "Corefile:3 - Error during parsing: unknown property 'colour'"},
		{".:0 {\n apiint 192.0.2.5 {\n  zone a.example.com\n  zone b.example.com\n }\n}", "Corefile:4 - Error during parsing: zone: used more than once (first on line 3)"},
		{".:0 {\n mdnsnodes {\n  zone a.example.com\n  interface eth0\n  interface eth1\n }\n}", "Corefile:5 - Error during parsing: interface: used more than once (first on line 4)"},
		{"ocp4.example.com:0 {\n apiint 192.0.2.5\n apiint 192.0.2.6\n}", "Corefile:3 - Error during parsing: this plugin can only be used once per Server Block"},
		{".:0 {\n appswildcard 192.0.2.10 {\n  zone $(id).example.com\n }\n}", `Corefile:3 - Error during parsing: invalid zone "$(id).example.com": label "$(id)" has '$'`},
		// lbconfig writes one node's keepalived and haproxy: one per Corefile.
		{"a.example.com:0 {\n lbconfig {\n  cluster a\n  api-vip 192.0.2.5\n  haproxy /tmp/a.cfg\n }\n}\nb.example.com:0 {\n lbconfig {\n  cluster a\n  api-vip 192.0.2.5\n  haproxy /tmp/b.cfg\n }\n}",
			"Corefile:9 - Error during parsing: lbconfig: already used in another server block (Corefile:2); one lbconfig per Corefile"},
	}
	for _, tc := range tests {
		inst, err := caddy.Start(input{tc.corefile})
		if err == nil {
			inst.Stop()
			t.Errorf("Expected %q to fail", tc.corefile)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Expected error %q, got %q", tc.want, err)
		}
	}
}

// TestServerLoadbalanceShufflesVIPs: several ingress VIPs of a family are all
// answered, and the stock loadbalance plugin (built in) shuffles them: it
// comes before the infradns plugins in the chain (and before cache, which
// they answer ahead of).
func TestServerLoadbalanceShufflesVIPs(t *testing.T) {
	udp, _ := startServer(t, `ocp4.example.com:0 {
		loadbalance
		cache 30
		appswildcard 192.0.2.10 192.0.2.11 192.0.2.12 2001:db8::10 2001:db8::11 2001:db8::12
	}`)
	for _, tc := range []struct {
		qtype uint16
		want  []string
	}{
		{dns.TypeA, []string{"192.0.2.10", "192.0.2.11", "192.0.2.12"}},
		{dns.TypeAAAA, []string{"2001:db8::10", "2001:db8::11", "2001:db8::12"}},
	} {
		orders := map[string]bool{}
		// The chance that 60 shuffles of three records all give one order is
		// (1/6)^59: never.
		for range 60 {
			r := exchange(t, "udp", udp, "console.apps.ocp4.example.com.", tc.qtype, 0)
			got := strings.Fields(answers(r))
			if !slices.Equal(slices.Sorted(slices.Values(got)), tc.want) {
				t.Fatalf("%s: answer %v, want all of %v", dns.TypeToString[tc.qtype], got, tc.want)
			}
			orders[strings.Join(got, " ")] = true
		}
		if len(orders) < 2 {
			t.Errorf("%s: 60 answers came in one order %v: not shuffled", dns.TypeToString[tc.qtype], orders)
		}
	}
}

// TestServerOtherOpcodes: a NOTIFY (or any opcode but QUERY) for a name the
// infradns plugins own gets NOTIMP, over UDP and TCP, in a zone block and in
// a root block with zone: never the answer of a query.
func TestServerOtherOpcodes(t *testing.T) {
	blocks := map[string]string{
		"zone block": `ocp4.example.com:0 {
			apiint 192.0.2.5
			appswildcard 192.0.2.10
			mdnsnodes {
				cluster ocp4
				bind 127.0.0.1
			}
		}`,
		"root block": `.:0 {
			apiint 192.0.2.5 {
				zone ocp4.example.com
			}
			appswildcard 192.0.2.10 {
				zone ocp4.example.com
			}
			mdnsnodes {
				zone ocp4.example.com
				cluster ocp4
				bind 127.0.0.1
			}
		}`,
	}
	for name, corefile := range blocks {
		t.Run(name, func(t *testing.T) {
			udp, tcp := startServer(t, corefile)
			for _, tc := range []struct {
				qname  string
				opcode int
			}{
				{"api-int.ocp4.example.com.", dns.OpcodeNotify},
				{"x.apps.ocp4.example.com.", dns.OpcodeNotify},
				{"master-0.ocp4.example.com.", dns.OpcodeNotify},
				{"api-int.ocp4.example.com.", dns.OpcodeUpdate},
			} {
				for _, nt := range []struct{ net, addr string }{{"udp", udp}, {"tcp", tcp}} {
					m := new(dns.Msg)
					m.SetQuestion(tc.qname, dns.TypeA)
					m.Opcode = tc.opcode
					c := &dns.Client{Net: nt.net, Timeout: 2 * time.Second}
					r, _, err := c.Exchange(m, nt.addr)
					if err != nil {
						t.Fatalf("%s %s over %s: %v", dns.OpcodeToString[tc.opcode], tc.qname, nt.net, err)
					}
					if r.Rcode != dns.RcodeNotImplemented || len(r.Answer) != 0 {
						t.Errorf("%s %s over %s: %s with %d answers, want NOTIMP and none", dns.OpcodeToString[tc.opcode], tc.qname, nt.net, dns.RcodeToString[r.Rcode], len(r.Answer))
					}
				}
			}
		})
	}
}

// TestServerMultisocket: `multisocket 2` opens two UDP sockets on the one
// port (SO_REUSEPORT), as /proc/net/udp shows, and queries from many source
// ports are all answered by our plugins; after a reload (what the reload
// plugin and SIGUSR1 do) there are still two: a reload that handed one
// socket's descriptor to every server would serve on one (CoreDNS issue
// 5595, fixed by coredns/caddy pull request 6).
func TestServerMultisocket(t *testing.T) {
	port := plugintest.FreePort(t, "udp", "tcp")
	corefile := fmt.Sprintf(`ocp4.example.com:%d {
		bind 127.0.0.1
		multisocket 2
		apiint 192.0.2.5
	}`, port)
	inst, err := caddy.Start(input{corefile})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { inst.Stop() })
	check := func(when string) {
		t.Helper()
		b, err := os.ReadFile("/proc/net/udp")
		if err != nil {
			t.Fatal(err)
		}
		local := fmt.Sprintf("0100007F:%04X", port)
		if n := strings.Count(string(b), local); n != 2 {
			t.Errorf("%s: %d UDP sockets on 127.0.0.1:%d, want 2:\n%s", when, n, port, b)
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		for range 20 { // each exchange dials from a new source port
			if r := exchange(t, "udp", addr, "api-int.ocp4.example.com.", dns.TypeA, 0); answers(r) != "192.0.2.5" {
				t.Fatalf("%s: api-int: %q, want 192.0.2.5", when, answers(r))
			}
		}
	}
	check("started")
	if inst, err = inst.Restart(input{corefile}); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	check("reloaded")
}
