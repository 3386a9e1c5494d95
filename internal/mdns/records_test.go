package mdns

import (
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

func TestAnnouncement(t *testing.T) {
	tests := []struct {
		name    string
		key     []byte
		goodbye bool
	}{
		{"unsigned", nil, false},
		{"signed", key, false},
		{"goodbye", nil, true},
		{"signed goodbye", key, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			z := testZone(tc.key)
			m := roundTrip(t, z.Announcement(NewStamp(t0), tc.goodbye))
			if !m.Response || !m.Authoritative || m.Id != 0 || len(m.Question) != 0 {
				t.Fatalf("Header: response %v aa %v id %d questions %d", m.Response, m.Authoritative, m.Id, len(m.Question))
			}
			want := []string{"PTR _workstation._tcp.local.", `SRV ocp4\ Workstation-node1._workstation._tcp.local.`, `TXT ocp4\ Workstation-node1._workstation._tcp.local.`, "A node1.local.", "AAAA node1.local."}
			if got := names(m.Answer); !slices.Equal(got, want) {
				t.Fatalf("Answer %v, want %v", got, want)
			}
			for _, rr := range m.Answer {
				h := rr.Header()
				flush := h.Class&classFlush != 0
				if _, shared := rr.(*dns.PTR); flush == shared {
					t.Errorf("%s: cache-flush %v; want it on unique records only", h.Name, flush)
				}
				wantTTL := uint32(ServiceTTL)
				switch rr.(type) {
				case *dns.A, *dns.AAAA:
					wantTTL = HostTTL
				}
				if tc.goodbye {
					wantTTL = 0
				}
				if h.Ttl != wantTTL {
					t.Errorf("%s %s: TTL %d, want %d", dns.TypeToString[h.Rrtype], h.Name, h.Ttl, wantTTL)
				}
			}
			txt := m.Answer[2].(*dns.TXT)
			f := TXTFields(txt.Txt)
			if f[txtCluster] != "ocp4" {
				t.Errorf("TXT %v: want cluster=ocp4", txt.Txt)
			}
			_, signed := f[txtSig]
			if signed != (tc.key != nil) {
				t.Errorf("TXT %v: signed %v, want %v", txt.Txt, signed, tc.key != nil)
			}
			if signed {
				s := Signed{Cluster: "ocp4", Host: "node1.local.", Addrs: []netip.Addr{addr1, addr6}, Goodbye: tc.goodbye}
				if err := NewVerifier(key).Check(t0, s, f); err != nil {
					t.Errorf("Own signature: %v", err)
				}
			}
			srv := m.Answer[1].(*dns.SRV)
			if srv.Target != "node1.local." || srv.Port != DefaultPort {
				t.Errorf("SRV %v", srv)
			}
		})
	}
}

func TestDefaultService(t *testing.T) {
	s := DefaultService("ocp4", "master-0")
	if s.Instance != "ocp4 Workstation-master-0" || s.Host != "master-0.local." || s.Port != 42424 || s.TypeName() != "_workstation._tcp.local." {
		t.Fatalf("DefaultService = %+v", s)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := []Service{{Instance: "", Type: "_x._tcp", Host: "a.local."}, {Instance: "x", Type: "x._tcp", Host: "a.local."}, {Instance: "x", Type: "_x._tcp", Host: ""}}
	for _, b := range bad {
		if b.Validate() == nil {
			t.Errorf("Validate(%+v) = nil, want an error", b)
		}
	}
}

func TestProbe(t *testing.T) {
	m := roundTrip(t, testZone(nil).Probe())
	if m.Response || len(m.Question) != 2 {
		t.Fatalf("Probe: %v", m)
	}
	for _, qs := range m.Question {
		if qs.Qtype != dns.TypeANY || qs.Qclass&classUnicast == 0 {
			t.Errorf("Probe question %v: want ANY with the QU bit", qs)
		}
	}
	if got := names(m.Ns); len(got) != 3 {
		t.Errorf("Probe authority %v: want A, AAAA, SRV", got)
	}
}

func TestUsableAddrs(t *testing.T) {
	in := []net.Addr{
		&net.IPNet{IP: net.ParseIP("198.51.100.11"), Mask: net.CIDRMask(24, 32)},
		&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)},
		&net.IPNet{IP: net.ParseIP("2001:db8:1::11"), Mask: net.CIDRMask(64, 128)},
		&net.IPNet{IP: net.ParseIP("127.0.0.1"), Mask: net.CIDRMask(8, 32)},
		&net.IPAddr{IP: net.ParseIP("198.51.100.11")},
	}
	got := UsableAddrs(in, false)
	want := []netip.Addr{addr1, addr6}
	if !slices.Equal(got, want) {
		t.Errorf("UsableAddrs = %v, want %v", got, want)
	}
	if got := UsableAddrs(in, true); len(got) != 3 {
		t.Errorf("UsableAddrs with link-local = %v, want 3 addresses", got)
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		host  string
		label string
		ok    bool
	}{
		{"node1.local.", "node1", true},
		{"Node1.LOCAL", "node1", true},
		{"a.b.local.", "", false},
		{"local.", "", false},
		{"-x.local.", "", false},
		{"x_y.local.", "", false},
		{"node1.example.", "", false},
	} {
		l, ok := HostLabel(tc.host, "local.")
		if l != tc.label || ok != tc.ok {
			t.Errorf("HostLabel(%q) = %q, %v; want %q, %v", tc.host, l, ok, tc.label, tc.ok)
		}
	}
	for _, s := range []string{"ocp4 Workstation-node1", `a.b\c "d"`, "caf\xc3\xa9"} {
		name := escapeLabel(s) + ".local."
		got, rest := splitFirst(name)
		if got != s || rest != "local." {
			t.Errorf("splitFirst(escapeLabel(%q)) = %q, %q", s, got, rest)
		}
		rr := &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: []string{"x"}}
		m := new(dns.Msg)
		m.Answer = []dns.RR{rr}
		back := roundTrip(t, m)
		if back.Answer[0].Header().Name != name {
			t.Errorf("Wire round trip of %q gives %q", name, back.Answer[0].Header().Name)
		}
	}
}

func TestWithout(t *testing.T) {
	vip4, vip6 := netip.MustParseAddr("198.51.100.120"), netip.MustParseAddr("2001:db8:1::120")
	as := []netip.Addr{addr1, vip4, addr6, vip6}
	for _, tc := range []struct {
		name string
		drop []netip.Addr
		want []netip.Addr
	}{
		{"nothing", nil, as},
		{"the vips", []netip.Addr{vip4, vip6}, []netip.Addr{addr1, addr6}},
		{"mapped form", []netip.Addr{netip.AddrFrom16(vip4.As16())}, []netip.Addr{addr1, addr6, vip6}},
		{"not held", []netip.Addr{netip.MustParseAddr("192.0.2.1")}, as},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Without(as, tc.drop); !slices.Equal(got, tc.want) {
				t.Errorf("Without = %v, want %v", got, tc.want)
			}
		})
	}
}
