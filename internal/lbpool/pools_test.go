package lbpool

import (
	"net/netip"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cfg, err := Parse([]byte(`pools:
- name: default
  addresses:
  - 192.0.2.100-192.0.2.109
  - 198.51.100.0/30
  - 2001:db8:100::/126
- name: public
  addresses: [203.0.113.7]
  autoAssign: false
  namespaces: [shop, bank, shop]
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Pools) != 2 {
		t.Fatalf("%d pools, want 2", len(cfg.Pools))
	}
	def, pub := cfg.Pool("default"), cfg.Pool("public")
	for _, tc := range []struct {
		what      string
		got, want any
	}{
		{"default ranges", rangesString(def.Ranges), "192.0.2.100-192.0.2.109 198.51.100.1-198.51.100.2 2001:db8:100::1-2001:db8:100::3"},
		{"default autoAssign", def.AutoAssign, true},
		{"default line", def.Line, 2},
		{"default IPv4 size", def.Size(false), 12.0},
		{"default IPv6 size", def.Size(true), 3.0},
		{"public ranges", rangesString(pub.Ranges), "203.0.113.7"},
		{"public autoAssign", pub.AutoAssign, false},
		{"public namespaces", strings.Join(pub.Namespaces, ","), "bank,shop"},
		{"public serves shop", pub.Serves("shop"), true},
		{"public serves web", pub.Serves("web"), false},
		{"default serves web", def.Serves("web"), true},
		{"pool of .2", cfg.Of(netip.MustParseAddr("198.51.100.2")) == def, true},
		{"pool of .3 (broadcast)", cfg.Of(netip.MustParseAddr("198.51.100.3")) == nil, true},
		{"pool of 2001:db8:100::3", cfg.Of(netip.MustParseAddr("2001:db8:100::3")) == def, true},
		{"pool of 2001:db8:100:: (Subnet-Router anycast)", cfg.Of(netip.MustParseAddr("2001:db8:100::")) == nil, true},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %v, want %v", tc.what, tc.got, tc.want)
		}
	}
	big, err := Parse([]byte("pools: [{name: v6, addresses: ['2001:db8::/64']}]"))
	if err != nil {
		t.Fatal(err)
	}
	if got := big.Pools[0].Size(true); got != 1<<53 {
		t.Errorf("a /64's size: %v, want the cap 2^53", got)
	}
}

func rangesString(rs []Range) string {
	var s []string
	for _, r := range rs {
		s = append(s, r.String())
	}
	return strings.Join(s, " ")
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "empty: want pools:"},
		{"pool:\n- name: a\n", "1: field pool not found"},
		{"pools:\n- name: a\n  adresses: [192.0.2.1]\n", "3: field adresses not found"},
		{"pools:\n- name: A\n  addresses: [192.0.2.1]\n", `2: pool "A": name: "A" is not a DNS-1123 label`},
		{"pools:\n- name: a\n", `2: pool "a": no addresses`},
		{"pools:\n- name: a\n  addresses: [192.0.2.1]\n- name: a\n  addresses: [192.0.2.2]\n", `4: pool "a": a second pool of that name (first on line 2)`},
		{"pools:\n- name: a\n  addresses: [192.0.2.0/24]\n- name: b\n  addresses: [192.0.2.200-192.0.2.210]\n", `4: pool "b": 192.0.2.200-192.0.2.210 overlaps 192.0.2.1-192.0.2.254 of pool "a" (line 2)`},
		{"pools:\n- name: a\n  addresses: [192.0.2.10-192.0.2.20, 192.0.2.5-192.0.2.30]\n", `overlaps 192.0.2.10-192.0.2.20 of pool "a"`},
		{"pools:\n- name: a\n  addresses: [192.0.2.9-192.0.2.1]\n", "the range ends before it starts"},
		{"pools:\n- name: a\n  addresses: [192.0.2.1-2001:db8::1]\n", "both ends of one family"},
		{"pools:\n- name: a\n  addresses: [192.0.2.1/24]\n", "host bits set (the prefix is 192.0.2.0/24)"},
		{"pools:\n- name: a\n  addresses: ['::ffff:192.0.2.0/120']\n", "write IPv4 prefixes as IPv4"},
		{"pools:\n- name: a\n  addresses: [224.0.0.0/24]\n", "cannot be a Service's address"},
		{"pools:\n- name: a\n  addresses: [223.255.255.250-224.0.0.5]\n", "cannot be a Service's address"},
		{"pools:\n- name: a\n  addresses: [fe80::/64]\n", "cannot be a Service's address"},
		{"pools:\n- name: a\n  addresses: [web]\n", `"web": want FROM-TO, a CIDR or an address`},
		{"pools:\n- name: a\n  addresses: [192.0.2.1]\n  namespaces: [Shop]\n", `namespaces: "Shop" is not a namespace name`},
		{"pools:\n- name: a\n  addresses: [192.0.2.1\n", "3: did not find expected"},
		{"pools:\n- name: a\n  addresses: [192.0.2.1]\n  autoAssign: maybe\n", "4: cannot unmarshal !!str `maybe`"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}
