package nodecfg

import (
	"net/netip"
	"testing"
)

// TestCheckLink: the file against the interfaces of the node it is
// rendered on. base (a control-plane node) names ens3 on line 5.
func TestCheckLink(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	lo := pfx("127.0.0.1/8", "::1/128")
	const far = ": keepalived would hold it where no neighbour looks for it"
	for _, tc := range []struct {
		name   string
		set    map[string]string
		add    []string
		ifaces map[string][]netip.Prefix
		want   string
	}{
		{"on the link", nil, nil, map[string][]netip.Prefix{"lo": lo, "ens3": pfx("192.0.2.11/24", "2001:db8::11/64", "fe80::1/64")}, ""},
		{"holding the VIP already", nil, nil, map[string][]netip.Prefix{"ens3": pfx("192.0.2.11/24", "192.0.2.5/32", "2001:db8::11/64", "2001:db8::5/128")}, ""},
		{"no such interface", nil, nil, map[string][]netip.Prefix{"lo": lo, "eth0": pfx("192.0.2.11/24")},
			`c.yaml:5: interface: "ens3": no such interface on this node (it has eth0, lo)`},
		{"api VIP on another subnet", nil, nil, map[string][]netip.Prefix{"ens3": pfx("198.51.100.11/24", "2001:db8::11/64")},
			"c.yaml:5: apiVIPs, interface: 192.0.2.5 is outside every subnet on ens3 (198.51.100.11/24, 2001:db8::11/64)" + far},
		{"no IPv6 subnet for the IPv6 VIP", nil, nil, map[string][]netip.Prefix{"ens3": pfx("192.0.2.11/24", "fe80::1/64")},
			"c.yaml:5: apiVIPs, interface: 2001:db8::5 is outside every subnet on ens3 (192.0.2.11/24, fe80::1/64)" + far},
		// The VIP keepalived added is not the subnet it belongs in.
		{"only the VIP's host route", nil, nil, map[string][]netip.Prefix{"ens3": pfx("198.51.100.11/24", "192.0.2.5/32", "2001:db8::11/64")},
			"c.yaml:5: apiVIPs, interface: 192.0.2.5 is outside every subnet on ens3 (198.51.100.11/24, 2001:db8::11/64)" + far},
		{"no address at all", nil, nil, map[string][]netip.Prefix{"ens3": nil},
			"c.yaml:5: apiVIPs, interface: 192.0.2.5 is outside every subnet on ens3 (no subnet)" + far},
		// A worker holds the ingress VIPs, not the API's.
		{"worker on the ingress subnet", map[string]string{"role": "role: worker"}, nil, map[string][]netip.Prefix{"ens3": pfx("192.0.2.21/24", "2001:db8::21/64")}, ""},
		{"worker on another subnet", map[string]string{"role": "role: worker", "apiVIPs": "apiVIPs: [198.51.100.5]"}, nil, map[string][]netip.Prefix{"ens3": pfx("198.51.100.21/24", "2001:db8::21/64")},
			"c.yaml:5: ingressVIPs, interface: 192.0.2.10 is outside every subnet on ens3 (198.51.100.21/24, 2001:db8::21/64)" + far},
		// BGP announces host routes: no subnet, but the interface must be.
		{"bgp off the subnet", nil, []string{"vipMode: bgp"}, map[string][]netip.Prefix{"ens3": pfx("198.51.100.11/24")}, ""},
		{"bgp without the interface", nil, []string{"vipMode: bgp"}, map[string][]netip.Prefix{"eth0": pfx("198.51.100.11/24")},
			`c.yaml:5: interface: "ens3": no such interface on this node (it has eth0)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("c.yaml", []byte(edit(tc.set, tc.add...)))
			if err != nil {
				t.Fatal(err)
			}
			err = f.CheckLink(tc.ifaces)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("err =\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}
