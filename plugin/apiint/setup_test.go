package apiint

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/fall"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		keys      []string // server block keys
		input     string
		shouldErr bool
		errText   string // substring of the error

		zones  []string
		apiInt string // addresses as printed, v4 then v6
		api    string
		ttl    uint32
		fall   fall.F
	}{
		{name: "one line", keys: []string{"ocp4.example.com."}, input: `apiint 192.0.2.5 2001:db8::5`,
			zones: []string{"ocp4.example.com."}, apiInt: "[192.0.2.5] [2001:db8::5]", api: "[192.0.2.5] [2001:db8::5]", ttl: 30},
		{name: "block zone from options", keys: []string{"."}, input: "apiint 192.0.2.5 {\n zone OCP4.example.com\n}",
			zones: []string{"ocp4.example.com."}, apiInt: "[192.0.2.5] []", api: "[192.0.2.5] []", ttl: 30},
		{name: "all options", keys: []string{"example.com."}, input: `apiint 192.0.2.5 192.0.2.6 {
			zone ocp4.example.com.
			api 198.51.100.1 2001:db8::1
			ttl 0
			fallthrough example.com
		}`, zones: []string{"ocp4.example.com."}, apiInt: "[192.0.2.5 192.0.2.6] []", api: "[198.51.100.1] [2001:db8::1]", ttl: 0,
			fall: fall.F{Zones: []string{"example.com."}}},
		{name: "bare fallthrough", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n fallthrough\n}",
			zones: []string{"ocp4.example.com."}, apiInt: "[192.0.2.5] []", api: "[192.0.2.5] []", ttl: 30, fall: fall.Root},
		{name: "ttl max", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n ttl 3600\n}",
			zones: []string{"ocp4.example.com."}, apiInt: "[192.0.2.5] []", api: "[192.0.2.5] []", ttl: 3600},
		{name: "v4-mapped v6 is v4", keys: []string{"ocp4.example.com."}, input: "apiint ::ffff:192.0.2.5",
			zones: []string{"ocp4.example.com."}, apiInt: "[192.0.2.5] []", api: "[192.0.2.5] []", ttl: 30},

		{name: "no address", keys: []string{"ocp4.example.com."}, input: `apiint`, shouldErr: true, errText: "at least one API VIP"},
		{name: "bad address", keys: []string{"ocp4.example.com."}, input: `apiint 192.0.2.500`, shouldErr: true, errText: `invalid address "192.0.2.500"`},
		{name: "hostname as address", keys: []string{"ocp4.example.com."}, input: `apiint api.example.com`, shouldErr: true, errText: "invalid address"},
		{name: "cidr as address", keys: []string{"ocp4.example.com."}, input: `apiint 192.0.2.0/24`, shouldErr: true, errText: "invalid address"},
		{name: "zoned address", keys: []string{"ocp4.example.com."}, input: `apiint fe80::1%eth0`, shouldErr: true, errText: "zoned"},
		{name: "unspecified address", keys: []string{"ocp4.example.com."}, input: `apiint 0.0.0.0`, shouldErr: true, errText: "not a unicast"},
		{name: "duplicate address", keys: []string{"ocp4.example.com."}, input: `apiint 192.0.2.5 192.0.2.5`, shouldErr: true, errText: "duplicate address"},
		{name: "root block without zone", keys: []string{"."}, input: `apiint 192.0.2.5`, shouldErr: true, errText: "needs the 'zone DOMAIN' option"},
		{name: "zone outside block", keys: []string{"example.org."}, input: "apiint 192.0.2.5 {\n zone ocp4.example.com\n}", shouldErr: true, errText: "outside the server block"},
		{name: "zone without arg", keys: []string{"."}, input: "apiint 192.0.2.5 {\n zone\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "zone two args", keys: []string{"."}, input: "apiint 192.0.2.5 {\n zone a.example.com b.example.com\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "zone invalid", keys: []string{"."}, input: "apiint 192.0.2.5 {\n zone a..b\n}", shouldErr: true, errText: "invalid zone"},
		{name: "zone not a host name", keys: []string{"."}, input: "apiint 192.0.2.5 {\n zone $(id).example.com\n}", shouldErr: true, errText: `invalid zone "$(id).example.com": label "$(id)" has '$'`},
		{name: "zone root", keys: []string{"."}, input: "apiint 192.0.2.5 {\n zone .\n}", shouldErr: true, errText: `invalid zone ".": no labels`},
		{name: "api without address", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n api\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "api bad address", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n api nope\n}", shouldErr: true, errText: `invalid address "nope"`},
		{name: "ttl too big", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n ttl 3601\n}", shouldErr: true, errText: "ttl must be in range [0, 3600]: 3601"},
		{name: "ttl negative", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n ttl -1\n}", shouldErr: true, errText: "ttl must be in range"},
		{name: "ttl not a number", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n ttl 30s\n}", shouldErr: true, errText: "whole number"},
		{name: "ttl missing", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n ttl\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "unknown option", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5 {\n label apps\n}", shouldErr: true, errText: "unknown property 'label'"},
		{name: "twice in a block", keys: []string{"ocp4.example.com."}, input: "apiint 192.0.2.5\napiint 192.0.2.6", shouldErr: true, errText: "Testfile:2 - Error during parsing: this plugin can only be used once per Server Block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = tc.keys
			a, err := parse(c)
			if tc.shouldErr {
				if err == nil {
					t.Fatalf("Expected an error, got none; handler %+v", a)
				}
				if !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("Expected error containing %q, got %q", tc.errText, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Expected no error, got %v", err)
			}
			if got := strings.Join(a.Zones, ","); got != strings.Join(tc.zones, ",") {
				t.Errorf("Expected zones %v, got %v", tc.zones, a.Zones)
			}
			if got := setString(a.apiInt.V4, a.apiInt.V6); got != tc.apiInt {
				t.Errorf("Expected api-int addresses %s, got %s", tc.apiInt, got)
			}
			if got := setString(a.api.V4, a.api.V6); got != tc.api {
				t.Errorf("Expected api addresses %s, got %s", tc.api, got)
			}
			if a.ttl != tc.ttl {
				t.Errorf("Expected ttl %d, got %d", tc.ttl, a.ttl)
			}
			if !a.Fall.Equal(tc.fall) {
				t.Errorf("Expected fallthrough %v, got %v", tc.fall, a.Fall)
			}
		})
	}
}

func TestParseErrorHasPosition(t *testing.T) {
	c := caddy.NewTestController("dns", "apiint 192.0.2.5 {\n zone ocp4.example.com\n ttl 99999\n}")
	c.ServerBlockKeys = []string{"."}
	_, err := parse(c)
	if err == nil || !strings.Contains(err.Error(), "Testfile:3 - Error during parsing") {
		t.Fatalf("Expected the error to name Testfile:3, got %v", err)
	}
}

// TestParseRepeatedOption: an option given twice in the block is an error at
// the second use that names the option and the line of the first, never "the
// last one wins".
func TestParseRepeatedOption(t *testing.T) {
	tests := []struct {
		name  string
		input string
		err   string // the whole error of parse
	}{
		{name: "zone", input: "apiint 192.0.2.5 {\n zone a.example.com\n zone b.example.com\n}",
			err: "Testfile:3 - Error during parsing: zone: used more than once (first on line 2)"},
		{name: "zone, same value", input: "apiint 192.0.2.5 {\n zone a.example.com\n zone a.example.com\n}",
			err: "Testfile:3 - Error during parsing: zone: used more than once (first on line 2)"},
		{name: "api", input: "apiint 192.0.2.5 {\n api 198.51.100.1\n ttl 5\n api 198.51.100.2\n}",
			err: "Testfile:4 - Error during parsing: api: used more than once (first on line 2)"},
		{name: "ttl", input: "apiint 192.0.2.5 {\n\n ttl 5\n zone a.example.com\n\n ttl 60\n}",
			err: "Testfile:6 - Error during parsing: ttl: used more than once (first on line 3)"},
		{name: "fallthrough", input: "apiint 192.0.2.5 {\n fallthrough\n fallthrough\n}",
			err: "Testfile:3 - Error during parsing: fallthrough: used more than once (first on line 2)"},
		{name: "fallthrough with zones", input: "apiint 192.0.2.5 {\n fallthrough a.example.com\n fallthrough b.example.com\n}",
			err: "Testfile:3 - Error during parsing: fallthrough: used more than once (first on line 2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = []string{"example.com."}
			a, err := parse(c)
			if err == nil || err.Error() != tc.err {
				t.Fatalf("Error %v (handler %+v), want %q", err, a, tc.err)
			}
		})
	}
}

func setString(v4, v6 []net.IP) string { return fmt.Sprint(v4) + " " + fmt.Sprint(v6) }

func TestParseReverse(t *testing.T) {
	for _, tc := range []struct {
		input   string
		zones   []string
		errText string
	}{
		{"reverse 192.0.2.0/24 2001:db8::/32", []string{"2.0.192.in-addr.arpa.", "8.b.d.0.1.0.0.2.ip6.arpa."}, ""},
		{"reverse 10.0.0.0/8", []string{"10.in-addr.arpa."}, ""},
		// Off an octet boundary: the zones that cover it exactly.
		{"reverse 192.0.2.0/23", []string{"2.0.192.in-addr.arpa.", "3.0.192.in-addr.arpa."}, ""},
		{"reverse", nil, "Wrong argument count"},
		{"reverse 192.0.2.1", nil, "not a CIDR"},
		{"reverse 192.0.2.1/24", nil, "host bits set: the network is 192.0.2.0/24"},
		{"reverse ::ffff:192.0.2.0/120", nil, "IPv4-mapped"},
	} {
		c := caddy.NewTestController("dns", "apiint 192.0.2.5 {\n"+tc.input+"\n}")
		c.ServerBlockKeys = []string{"ocp4.example.com."}
		a, err := parse(c)
		if tc.errText != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Errorf("%s: expected an error with %q, got %v", tc.input, tc.errText, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.input, err)
			continue
		}
		if fmt.Sprint(a.reverseZones) != fmt.Sprint(tc.zones) {
			t.Errorf("%s: zones %v, want %v", tc.input, a.reverseZones, tc.zones)
		}
	}
}
