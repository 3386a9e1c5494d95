package mdns

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func seedPackets(f *testing.F) {
	for _, k := range [][]byte{nil, key} {
		z := testZone(k)
		for _, m := range []*dns.Msg{z.Announcement(NewStamp(t0), false), z.Announcement(NewStamp(t0), true), z.Probe(),
			query(q("_workstation._tcp.local.", dns.TypePTR)), query(q("node1.local.", dns.TypeA), q("node1.local.", dns.TypeAAAA))} {
			b, err := m.Pack()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, uint16(Port))
			f.Add(b, uint16(40000))
		}
		if r := z.Respond(query(q("_workstation._tcp.local.", dns.TypePTR)), mdnsSrc, NewStamp(t0)); r != nil {
			b, _ := r.Msg.Pack()
			f.Add(b, uint16(Port))
		}
	}
}

// FuzzParsePacket drives the resolver's receive path: parse, cache, expire,
// refresh and index, with hostile bytes. The cache must never serve a name
// that is not a single valid label or is reserved.
func FuzzParsePacket(f *testing.F) {
	seedPackets(f)
	f.Fuzz(func(t *testing.T, b []byte, _ uint16) {
		m, err := ParsePacket(b)
		if err != nil {
			return
		}
		for _, v := range []*Verifier{nil, NewVerifier(key)} {
			c := NewCache(testFilter(), v)
			src := netip.MustParseAddr("198.51.100.7")
			c.Process(t0, src, m)
			c.Process(t0.Add(500*time.Millisecond), netip.MustParseAddr("fe80::7"), m)
			for _, at := range []time.Duration{time.Second, 2 * time.Second, time.Hour} {
				now := t0.Add(at)
				c.Due(now)
				c.Expire(now)
				c.Next()
				hosts := c.Heard(now).Hosts
				for i, h := range hosts {
					if !ValidHostLabel(h.Label) || slices.Contains(DefaultReserved, h.Label) {
						t.Fatalf("Served invalid or reserved label %q", h.Label)
					}
					if i > 0 && hosts[i-1].Label >= h.Label {
						t.Fatalf("Labels %q, %q: not sorted or not once each", hosts[i-1].Label, h.Label)
					}
					if len(h.Addrs) == 0 {
						t.Fatalf("Served %q with no address", h.Label)
					}
					for j, a := range h.Addrs {
						if a.Zone() != "" || a.Is4In6() || (j > 0 && h.Addrs[j-1].Compare(a) >= 0) {
							t.Fatalf("Served %q with addresses %v: zoned, mapped, unsorted or repeated", h.Label, h.Addrs)
						}
					}
				}
			}
		}
	})
}

// FuzzPublisherHandle drives the publisher's query path: whatever arrives,
// a reply must pack, stay within an mDNS packet, and a legacy reply must
// echo the query's ID.
func FuzzPublisherHandle(f *testing.F) {
	seedPackets(f)
	f.Fuzz(func(t *testing.T, b []byte, port uint16) {
		m, err := ParsePacket(b)
		if err != nil {
			return
		}
		for _, k := range [][]byte{nil, key} {
			z := testZone(k)
			z.Conflicts(m)
			z.ProbeConflict(m)
			z.ByeForUs(m)
			r := z.Respond(m, netip.AddrPortFrom(netip.MustParseAddr("198.51.100.7"), port), NewStamp(t0))
			if r == nil {
				continue
			}
			out, err := r.Msg.Pack()
			if err != nil {
				t.Fatalf("Reply does not pack: %v", err)
			}
			if len(out) > maxPacket {
				t.Fatalf("Reply of %d bytes", len(out))
			}
			if port != Port && r.Msg.Id != m.Id {
				t.Fatalf("Legacy reply id %d, query id %d", r.Msg.Id, m.Id)
			}
			if len(r.Msg.Answer) == 0 {
				t.Fatal("Reply without answers")
			}
		}
	})
}
