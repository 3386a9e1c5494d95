package bind

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
)

func TestHosts(t *testing.T) {
	a := netip.MustParseAddr
	ifaces := map[string][]Addr{
		"lo": {{IP: a("127.0.0.1"), Usable: true}, {IP: a("::1"), Usable: true}},
		"eth0": {
			{IP: a("198.51.100.11"), Usable: true},
			{IP: a("192.0.2.5"), Usable: true}, // a VIP keepalived added
			{IP: a("fe80::1"), Usable: false},  // in duplicate address detection
			{IP: a("fe80::2"), Usable: true},
			{IP: a("2001:db8::11"), Usable: true},
		},
		"eth1": nil, // up, no address yet
	}
	tests := []struct {
		name string
		dirs []Directive
		want []string
		err  string
	}{
		{"interface: usable addresses, link-local with its zone", []Directive{{Args: []string{"eth0"}}},
			[]string{"198.51.100.11", "192.0.2.5", "fe80::2%eth0", "2001:db8::11"}, ""},
		{"literal addresses as given, present or not", []Directive{{Args: []string{"127.0.0.1", "192.0.2.99"}}},
			[]string{"127.0.0.1", "192.0.2.99"}, ""},
		{"except an address", []Directive{{Args: []string{"lo"}, Except: []string{"127.0.0.1"}}}, []string{"::1"}, ""},
		{"except an interface", []Directive{{Args: []string{"lo", "eth0"}, Except: []string{"eth0"}}}, []string{"127.0.0.1", "::1"}, ""},
		{"except is per directive", []Directive{{Args: []string{"lo"}, Except: []string{"::1"}}, {Args: []string{"::1"}}}, []string{"127.0.0.1", "::1"}, ""},
		{"duplicates once", []Directive{{Args: []string{"lo", "127.0.0.1"}}, {Args: []string{"lo"}}}, []string{"127.0.0.1", "::1"}, ""},
		{"an interface without an address yet", []Directive{{Args: []string{"eth1", "lo"}}}, []string{"127.0.0.1", "::1"}, ""},
		{"neither an address nor an interface", []Directive{{Args: []string{"eth9"}}}, nil, `not a valid IP address or interface name: "eth9"`},
		{"a bad except", []Directive{{Args: []string{"lo"}, Except: []string{"nope"}}}, nil, `"nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Hosts(tc.dirs, ifaces)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Hosts = %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("Hosts = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		input string
		want  []Directive
		err   string
	}{
		{"bind lo", []Directive{{Args: []string{"lo"}}}, ""},
		{"bind lo eth0 {\n except 127.0.0.1\n}\nbind ::1", []Directive{{Args: []string{"lo", "eth0"}, Except: []string{"127.0.0.1"}}, {Args: []string{"::1"}}}, ""},
		{"bind", nil, "Testfile:1 - Error during parsing: at least one address or interface name is expected"},
		{"bind lo {\n except\n}", nil, "Testfile:2 - Error during parsing: at least one address or interface must be given to except"},
		{"bind lo {\n only 127.0.0.1\n}", nil, `Testfile:2 - Error during parsing: invalid option "only"`},
	}
	for _, tc := range tests {
		got, err := parse(caddy.NewTestController("dns", tc.input))
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: %v, want error %q", tc.input, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Fatalf("%q: %v, %v", tc.input, got, err)
		}
		for i := range got {
			if !slices.Equal(got[i].Args, tc.want[i].Args) || !slices.Equal(got[i].Except, tc.want[i].Except) {
				t.Errorf("%q: %+v, want %+v", tc.input, got, tc.want)
			}
		}
	}
}
