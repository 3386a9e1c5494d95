package appswildcard

import (
	"fmt"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/fall"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		keys      []string
		input     string
		shouldErr bool
		errText   string

		wildcards string // "domain=[v4] [v6]/ttl" per wildcard, longest domain first
		zones     []string
		fall      fall.F
	}{
		{name: "one line", keys: []string{"ocp4.example.com."}, input: `appswildcard 192.0.2.10 2001:db8::10`,
			wildcards: "apps.ocp4.example.com.=[192.0.2.10] [2001:db8::10]/30", zones: []string{"ocp4.example.com."}},
		{name: "root block with zone", keys: []string{"."}, input: "appswildcard 192.0.2.10 {\n zone ocp4.example.com\n}",
			wildcards: "apps.ocp4.example.com.=[192.0.2.10] []/30", zones: []string{"ocp4.example.com."}},
		{name: "all options", keys: []string{"."}, input: `appswildcard 192.0.2.10 192.0.2.11 {
			zone ocp4.example.com
			label Apps2
			ttl 5
			fallthrough
		}`, wildcards: "apps2.ocp4.example.com.=[192.0.2.10 192.0.2.11] []/5", zones: []string{"ocp4.example.com."}, fall: fall.Root},
		{name: "second ingress domain and an appsDomain", keys: []string{"."}, input: `
			appswildcard 192.0.2.10 {
				zone ocp4.example.com
			}
			appswildcard 192.0.2.20 {
				zone ocp4.example.com
				label shard1.apps
			}
			appswildcard 192.0.2.30 {
				zone example.net
			}`,
			wildcards: "shard1.apps.ocp4.example.com.=[192.0.2.20] []/30 apps.ocp4.example.com.=[192.0.2.10] []/30 apps.example.net.=[192.0.2.30] []/30",
			zones:     []string{"ocp4.example.com.", "example.net."}},

		{name: "no address", keys: []string{"ocp4.example.com."}, input: `appswildcard`, shouldErr: true, errText: "at least one ingress VIP"},
		{name: "bad address", keys: []string{"ocp4.example.com."}, input: `appswildcard 192.0.2`, shouldErr: true, errText: `invalid address "192.0.2"`},
		{name: "duplicate address", keys: []string{"ocp4.example.com."}, input: `appswildcard 2001:db8::1 2001:DB8::1`, shouldErr: true, errText: "duplicate address"},
		{name: "root block without zone", keys: []string{"."}, input: `appswildcard 192.0.2.10`, shouldErr: true, errText: "needs the 'zone DOMAIN' option"},
		{name: "zone outside block", keys: []string{"example.org."}, input: "appswildcard 192.0.2.10 {\n zone example.net\n}", shouldErr: true, errText: "outside the server block"},
		{name: "label wildcard", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10 {\n label *.apps\n}", shouldErr: true, errText: "invalid label"},
		{name: "label absolute", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10 {\n label apps.\n}", shouldErr: true, errText: "invalid label"},
		{name: "label underscore", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10 {\n label _apps\n}", shouldErr: true, errText: `invalid label "_apps": label "_apps" has '_'`},
		{name: "label hyphen", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10 {\n label shard-.apps\n}", shouldErr: true, errText: `invalid label "shard-.apps": label "shard-" starts or ends with '-'`},
		{name: "zone not a host name", keys: []string{"."}, input: "appswildcard 192.0.2.10 {\n zone a+b.example.com\n}", shouldErr: true, errText: `invalid zone "a+b.example.com": label "a+b" has '+'`},
		{name: "label missing", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10 {\n label\n}", shouldErr: true, errText: "Wrong argument count"},
		{name: "ttl out of range", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10 {\n ttl 4000\n}", shouldErr: true, errText: "ttl must be in range"},
		{name: "unknown option", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10 {\n api 192.0.2.1\n}", shouldErr: true, errText: "unknown property 'api'"},
		{name: "same wildcard twice", keys: []string{"ocp4.example.com."}, input: "appswildcard 192.0.2.10\nappswildcard 192.0.2.11 {\n label APPS\n}",
			shouldErr: true, errText: "wildcard *.apps.ocp4.example.com. is already defined on line 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := caddy.NewTestController("dns", tc.input)
			c.ServerBlockKeys = tc.keys
			a, err := parse(c)
			if tc.shouldErr {
				if err == nil {
					t.Fatalf("Expected an error, got none")
				}
				if !strings.Contains(err.Error(), tc.errText) {
					t.Fatalf("Expected error containing %q, got %q", tc.errText, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Expected no error, got %v", err)
			}
			var got []string
			for _, w := range a.wildcards {
				got = append(got, fmt.Sprintf("%s=%v %v/%d", w.Domain, w.Addrs.V4, w.Addrs.V6, w.TTL))
			}
			if strings.Join(got, " ") != tc.wildcards {
				t.Errorf("Expected wildcards %q, got %q", tc.wildcards, strings.Join(got, " "))
			}
			if strings.Join(a.Zones, ",") != strings.Join(tc.zones, ",") {
				t.Errorf("Expected zones %v, got %v", tc.zones, a.Zones)
			}
			if !a.Fall.Equal(tc.fall) {
				t.Errorf("Expected fallthrough %v, got %v", tc.fall, a.Fall)
			}
		})
	}
}

// TestParseRepeatedOption: an option given twice in one directive's block is
// an error at the second use naming the option and the line of the first. Each
// directive (one wildcard domain) has its own block: the same option in two
// directives is fine (see TestParse).
func TestParseRepeatedOption(t *testing.T) {
	tests := []struct {
		name  string
		input string
		err   string // the whole error of parse
	}{
		{name: "zone", input: "appswildcard 192.0.2.10 {\n zone a.example.com\n zone b.example.com\n}",
			err: "Testfile:3 - Error during parsing: zone: used more than once (first on line 2)"},
		{name: "label", input: "appswildcard 192.0.2.10 {\n label apps\n ttl 5\n label apps2\n}",
			err: "Testfile:4 - Error during parsing: label: used more than once (first on line 2)"},
		{name: "ttl", input: "appswildcard 192.0.2.10 {\n ttl 5\n\n ttl 60\n}",
			err: "Testfile:4 - Error during parsing: ttl: used more than once (first on line 2)"},
		{name: "fallthrough", input: "appswildcard 192.0.2.10 {\n fallthrough\n fallthrough a.example.com\n}",
			err: "Testfile:3 - Error during parsing: fallthrough: used more than once (first on line 2)"},
		{name: "in the second directive", input: "appswildcard 192.0.2.10 {\n label apps\n}\nappswildcard 192.0.2.20 {\n label shard1.apps\n zone a.example.com\n label shard2.apps\n}",
			err: "Testfile:7 - Error during parsing: label: used more than once (first on line 5)"},
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
