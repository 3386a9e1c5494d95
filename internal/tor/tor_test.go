package tor

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// lab is what the lab's routed tests run (test/e2e/lab): IPv4 and IPv6
// sessions, a password, the lab's fast timers.
var lab = Config{
	ASN:      64512,
	RouterID: netip.MustParseAddr("10.91.255.1"),
	Peers: []Peer{
		{Addr: netip.MustParseAddr("10.91.0.11"), ASN: 64513, Password: "s3cret"},
		{Addr: netip.MustParseAddr("fd00:91::11"), ASN: 64513},
	},
	BFD:          true,
	HoldTime:     3 * time.Second,
	Keepalive:    time.Second,
	ConnectRetry: time.Second,
	VIPs:         []netip.Prefix{netip.MustParsePrefix("10.91.100.0/24"), netip.MustParsePrefix("10.91.101.7/32"), netip.MustParsePrefix("fd00:91:100::/64")},
}

// renderCase is a rendered configuration's lines: all of want, none of not.
type renderCase struct {
	name      string
	cfg       Config
	want, not []string
}

func runRender(t *testing.T, render func(Config) string, cases []renderCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := render(tc.cfg)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Want %q in\n%s", w, got)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("Want no %q in\n%s", n, got)
				}
			}
		})
	}
}

func TestFRR(t *testing.T) {
	runRender(t, FRR, []renderCase{
		{"guide", Example, []string{
			"frr defaults datacenter\nno zebra nexthop kernel enable\n",
			"bfd\n profile fast\n  transmit-interval 100\n  receive-interval 100\n  detect-multiplier 3\n",
			"ip prefix-list infradns-vips seq 5 permit 192.0.2.0/24 ge 32\n",
			"route-map infradns-vips permit 10\n match ip address prefix-list infradns-vips\nexit\n",
			// Every node declared, with the cluster file's timers.
			" neighbor 198.51.100.11 remote-as 64513\n neighbor 198.51.100.11 timers 3 9\n neighbor 198.51.100.11 bfd profile fast\n",
			" neighbor 198.51.100.13 remote-as 64513\n",
			" address-family ipv4 unicast\n  maximum-paths 16\n  neighbor 198.51.100.11 activate\n  neighbor 198.51.100.11 route-map infradns-vips in\n",
			" address-family ipv6 unicast\n  maximum-paths 16\n  no neighbor 198.51.100.11 activate\n",
		}, []string{"listen range", "ebgp-requires-policy", "router-id", "timers connect", "password", "infradns-vips6"}},
		{"lab", lab, []string{
			" bgp router-id 10.91.255.1\n",
			" neighbor 10.91.0.11 timers 1 3\n neighbor 10.91.0.11 timers connect 1\n neighbor 10.91.0.11 password s3cret\n",
			"ip prefix-list infradns-vips seq 10 permit 10.91.101.7/32\n",
			"ipv6 prefix-list infradns-vips6 seq 5 permit fd00:91:100::/64 ge 128\n",
			"route-map infradns-vips permit 20\n match ipv6 address prefix-list infradns-vips6\n",
			"  no neighbor fd00:91::11 activate\n",
			" address-family ipv6 unicast\n  maximum-paths 16\n  no neighbor 10.91.0.11 activate\n  neighbor fd00:91::11 activate\n  neighbor fd00:91::11 route-map infradns-vips in\n",
		}, []string{"ebgp-requires-policy", "10.91.101.7/32 ge"}},
		{"no VIPs: every route, which eBGP needs a policy for", Config{ASN: 1, Peers: []Peer{{Addr: netip.MustParseAddr("192.0.2.1"), ASN: 2}}}, []string{
			" no bgp ebgp-requires-policy\n",
		}, []string{"route-map", "prefix-list", "bfd"}},
	})
}

func TestBIRD(t *testing.T) {
	runRender(t, BIRD, []renderCase{
		{"guide", Example, []string{
			"protocol kernel { ipv4 { import none; export all; }; merge paths on; }\n",
			"protocol bfd { interface \"*\" { min rx interval 100 ms; min tx interval 100 ms; multiplier 3; }; }\n",
			"protocol bgp node0 {\n  neighbor 198.51.100.11 as 64513; local as 64512;\n  hold time 9; keepalive time 3; error wait time 1, 5;\n  bfd on;\n  ipv4 { import where net ~ [ 192.0.2.0/24{32,32} ]; export none; };\n}\n",
			"protocol bgp node2 {\n  neighbor 198.51.100.13 as 64513;",
		}, []string{"router id", "connect retry", "password"}},
		{"lab", lab, []string{
			"router id 10.91.255.1;\n",
			"  hold time 3; keepalive time 1; connect retry time 1; connect delay time 1; error wait time 1, 5;\n  password \"s3cret\";\n",
			"  ipv4 { import where net ~ [ 10.91.100.0/24{32,32}, 10.91.101.7/32{32,32} ]; export none; };\n",
			"  ipv6 { import where net ~ [ fd00:91:100::/64{128,128} ]; export none; };\n",
		}, nil},
		{"no VIPs", Config{ASN: 1, Peers: []Peer{{Addr: netip.MustParseAddr("192.0.2.1"), ASN: 2}}}, []string{
			"  ipv4 { import all; export none; };\n",
		}, []string{"bfd"}},
		{"VIPs of the other family only", Config{ASN: 1, Peers: []Peer{{Addr: netip.MustParseAddr("192.0.2.1"), ASN: 2}}, VIPs: []netip.Prefix{netip.MustParsePrefix("2001:db8::/64")}}, []string{
			"  ipv4 { import none; export none; };\n",
		}, nil},
	})
}

func TestCheck(t *testing.T) {
	peer := Peer{Addr: netip.MustParseAddr("192.0.2.1"), ASN: 2}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for valid
	}{
		{"guide", Example, ""},
		{"lab", lab, ""},
		{"no ASN", Config{Peers: []Peer{peer}}, "ASN"},
		{"no peers", Config{ASN: 1}, "no node"},
		{"peer without ASN", Config{ASN: 1, Peers: []Peer{{Addr: peer.Addr}}}, "required"},
		{"peer twice", Config{ASN: 1, Peers: []Peer{peer, peer}}, "twice"},
		{"password with a space", Config{ASN: 1, Peers: []Peer{{Addr: peer.Addr, ASN: 2, Password: "a b"}}}, "password"},
		{"IPv6 router ID", Config{ASN: 1, Peers: []Peer{peer}, RouterID: netip.MustParseAddr("2001:db8::1")}, "router ID"},
		{"keepalive not below hold", Config{ASN: 1, Peers: []Peer{peer}, HoldTime: 3 * time.Second, Keepalive: 3 * time.Second}, "keepalive"},
		{"VIP prefix with host bits", Config{ASN: 1, Peers: []Peer{peer}, VIPs: []netip.Prefix{netip.MustParsePrefix("192.0.2.5/24")}}, "not a network"},
	} {
		err := tc.cfg.Check()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error about %q", tc.name, err, tc.want)
		}
	}
}

// TestGuide: the operator guide prints FRR's and BIRD's configuration as
// this package renders them for the guide's example, under the markers
// "<!-- tor: frr -->" and "<!-- tor: bird -->".
func TestGuide(t *testing.T) {
	b, err := os.ReadFile("../../docs/operator-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	guide := string(b)
	for _, tc := range []struct{ marker, want string }{
		{"<!-- tor: frr -->", FRR(Example)},
		{"<!-- tor: bird -->", BIRD(Example)},
	} {
		got, err := blockAfter(guide, tc.marker)
		if err != nil {
			t.Errorf("%s: %v", tc.marker, err)
			continue
		}
		if got != tc.want {
			t.Errorf("The guide's block after %s is not what the ToR renders. Want:\n%s\ngot:\n%s", tc.marker, tc.want, got)
		}
	}
}

// blockAfter returns the first fenced code block after marker.
func blockAfter(doc, marker string) (string, error) {
	i := strings.Index(doc, marker)
	if i < 0 {
		return "", os.ErrNotExist
	}
	rest := doc[i+len(marker):]
	open := strings.Index(rest, "```\n")
	if open < 0 {
		return "", os.ErrNotExist
	}
	rest = rest[open+4:]
	end := strings.Index(rest, "```\n")
	if end < 0 {
		return "", os.ErrNotExist
	}
	return rest[:end], nil
}
