package dnsname

import (
	"strings"
	"testing"
)

func TestCheckDomain(t *testing.T) {
	long63 := strings.Repeat("a", 63)
	tests := []struct {
		name    string
		in      string
		errText string // "" when valid; else a substring of the error
	}{
		{name: "plain", in: "ocp4.example.com"},
		{name: "fully qualified", in: "ocp4.example.com."},
		{name: "upper case", in: "OCP4.Example.COM"},
		{name: "one label", in: "cluster"},
		{name: "digits and hyphens", in: "ocp-4.0example.com"},
		{name: "leading digit", in: "4ocp.example.com"},
		{name: "punycode", in: "xn--bcher-kva.example"},
		{name: "63-char label", in: long63 + ".example.com"},
		{name: "253 characters", in: strings.Repeat(long63+".", 3) + strings.Repeat("a", 61)},
		{name: "253 characters and the dot", in: strings.Repeat(long63+".", 3) + strings.Repeat("a", 61) + "."},

		{name: "empty", in: "", errText: "no labels"},
		{name: "root", in: ".", errText: "no labels"},
		{name: "two trailing dots", in: "example.com..", errText: "empty label"},
		{name: "leading dot", in: ".example.com", errText: "empty label"},
		{name: "doubled dot", in: "a..b", errText: "empty label"},
		{name: "64-char label", in: long63 + "a.example.com", errText: `label "` + long63 + `a" is longer than 63`},
		{name: "254 characters", in: strings.Repeat(long63+".", 3) + strings.Repeat("a", 62), errText: "longer than 253"},
		{name: "leading hyphen", in: "-ocp4.example.com", errText: `label "-ocp4" starts or ends with '-'`},
		{name: "trailing hyphen", in: "ocp4-.example.com", errText: `label "ocp4-" starts or ends with '-'`},
		{name: "underscore", in: "_tcp.example.com", errText: `label "_tcp" has '_'`},
		{name: "wildcard", in: "*.example.com", errText: `label "*" has '*'`},
		{name: "shell substitution", in: "$(id).example.com", errText: `label "$(id)" has '$'`},
		{name: "semicolon", in: "a;b.example.com", errText: `label "a;b" has ';'`},
		{name: "hash", in: "a#b.example.com", errText: `label "a#b" has '#'`},
		{name: "space", in: "a b.example.com", errText: `label "a b" has ' '`},
		{name: "escaped dot", in: `a\.b.example.com`, errText: `label "a\\" has '\\'`},
		{name: "slash (CIDR)", in: "10.0.0.0/8", errText: `label "0/8" has '/'`},
		{name: "IPv4 address", in: "192.0.2.5", errText: `last label "5" is all digits`},
		{name: "non-ASCII", in: "bücher.example", errText: `label "bücher" has 'ü'`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckDomain(tc.in)
			if tc.errText == "" {
				if err != nil {
					t.Fatalf("CheckDomain(%q): %v, want no error", tc.in, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errText) {
				t.Fatalf("CheckDomain(%q): %v, want an error containing %q", tc.in, err, tc.errText)
			}
		})
	}
}

func TestCheckLabels(t *testing.T) {
	tests := []struct {
		in      string
		errText string
	}{
		{in: "apps"},
		{in: "shard1.apps"},
		{in: "Apps2"},
		{in: "1"}, // a relative name has no top-level label to be all digits

		{in: "", errText: "empty label"},
		{in: "apps.", errText: "empty label"},
		{in: ".apps", errText: "empty label"},
		{in: "*.apps", errText: `label "*" has '*'`},
		{in: "a*", errText: `label "a*" has '*'`},
		{in: "-apps", errText: "starts or ends with '-'"},
	}
	for _, tc := range tests {
		err := CheckLabels(tc.in)
		if tc.errText == "" {
			if err != nil {
				t.Errorf("CheckLabels(%q): %v, want no error", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.errText) {
			t.Errorf("CheckLabels(%q): %v, want an error containing %q", tc.in, err, tc.errText)
		}
	}
}
