package mdns

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

var (
	t0    = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key   = []byte("0123456789abcdef-shared-key")
	addr1 = netip.MustParseAddr("198.51.100.11")
	addr6 = netip.MustParseAddr("2001:db8:1::11")
)

func testZone(key []byte) *Zone {
	return NewZone("node1.local.", "ocp4", []Service{DefaultService("ocp4", "node1")}, []netip.Addr{addr6, addr1}, key)
}

func testFilter() Filter {
	return Filter{Cluster: "ocp4", Service: "_workstation._tcp.local.", Reserved: DefaultReserved}
}

// announce returns the announcement of a node as a receiver sees it.
func announce(t *testing.T, host string, cluster string, addrs []netip.Addr, k []byte, at time.Time, goodbye bool) *dns.Msg {
	t.Helper()
	z := NewZone(host+".local.", cluster, []Service{DefaultService(cluster, host)}, addrs, k)
	return roundTrip(t, z.Announcement(NewStamp(at), goodbye))
}

// roundTrip packs and parses m, as the wire would.
func roundTrip(t *testing.T, m *dns.Msg) *dns.Msg {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatalf("Pack: %v", err)
	}
	out, err := ParsePacket(b)
	if err != nil {
		t.Fatalf("ParsePacket: %v", err)
	}
	return out
}

func query(qs ...dns.Question) *dns.Msg {
	m := new(dns.Msg)
	m.Id = 4242
	m.Question = qs
	return m
}

func q(name string, t uint16) dns.Question {
	return dns.Question{Name: name, Qtype: t, Qclass: dns.ClassINET}
}

func names(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, dns.TypeToString[rr.Header().Rrtype]+" "+rr.Header().Name)
	}
	return out
}
