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
		// A flood: more addresses than a host may hold, a VIP among them,
		// every TTL the wire's largest.
		svc := DefaultService("ocp4", "flood")
		svc.TTL = 0xffffffff
		fz := NewZone("flood.local.", "ocp4", []Service{svc}, append(addrsFrom(0, 2*MaxHostAddrs), netip.MustParseAddr("198.51.100.5")), k)
		fz.HostTTL = 0xffffffff
		b, err := fz.Announcement(NewStamp(t0), false).Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint16(Port))
	}
}

// checkLimits checks that the cache keeps its limits and that its accounting
// of what each sender holds matches what it holds.
func checkLimits(t *testing.T, c *Cache) {
	t.Helper()
	addrs, instances := 0, map[netip.Addr]int{}
	bySource := map[netip.Addr]int{}
	for _, in := range c.instances {
		instances[in.creator]++
		for _, r := range []*rec{&in.srv, &in.txt} {
			if r.ttl > MaxTTL {
				t.Fatalf("Instance record with TTL %d", r.ttl)
			}
		}
	}
	for name, h := range c.hosts {
		if len(h.addrs) > MaxHostAddrs {
			t.Fatalf("Host %s holds %d addresses", name, len(h.addrs))
		}
		for a, r := range h.addrs {
			if slices.Contains(c.filter.Exclude, a) {
				t.Fatalf("Host %s holds the excluded %v", name, a)
			}
			if r.ttl > MaxTTL {
				t.Fatalf("Address record with TTL %d", r.ttl)
			}
			addrs++
			bySource[r.src]++
		}
	}
	if addrs != c.addrs || addrs > MaxAddrs || len(c.instances) > MaxEntries || len(c.hosts) > MaxEntries {
		t.Fatalf("%d addresses (counted %d), %d instances, %d hosts", addrs, c.addrs, len(c.instances), len(c.hosts))
	}
	for src, u := range c.bySource {
		if u.addrs != bySource[src] || u.instances != instances[src] || u.addrs+u.instances == 0 ||
			u.addrs > MaxSourceAddrs || u.instances > MaxSourceInstances {
			t.Fatalf("Sender %v: usage %+v, holds %d addresses and %d instances", src, *u, bySource[src], instances[src])
		}
	}
	for _, held := range []map[netip.Addr]int{bySource, instances} {
		for src := range held {
			if c.bySource[src] == nil {
				t.Fatalf("Sender %v holds records but has no usage", src)
			}
		}
	}
}

// FuzzParsePacket drives the resolver's receive path: parse, cache, expire,
// refresh and index, with hostile bytes. The cache must never serve a name
// that is not a single valid label or is reserved, nor an excluded address,
// and must keep its limits and its accounting.
func FuzzParsePacket(f *testing.F) {
	seedPackets(f)
	exclude := netip.MustParseAddr("198.51.100.5")
	f.Fuzz(func(t *testing.T, b []byte, _ uint16) {
		m, err := ParsePacket(b)
		if err != nil {
			return
		}
		for _, v := range []*Verifier{nil, NewVerifier(key)} {
			filter := testFilter()
			filter.Exclude = []netip.Addr{exclude}
			c := NewCache(filter, v)
			// Changed false means the snapshot is the same: a Browser
			// publishes nothing then.
			process := func(at time.Time, src netip.Addr) {
				before := served(c.Heard(at))
				res := c.Process(at, src, m)
				if after := served(c.Heard(at)); !res.Changed && !slices.Equal(before, after) {
					t.Fatalf("Served %v, then %v, but Changed is false", before, after)
				}
				checkLimits(t, c)
			}
			process(t0, netip.MustParseAddr("198.51.100.7"))
			process(t0.Add(500*time.Millisecond), netip.MustParseAddr("fe80::7"))
			process(t0.Add(700*time.Millisecond), netip.MustParseAddr("198.51.100.7"))
			for _, at := range []time.Duration{time.Second, 2 * time.Second, time.Hour, 2 * time.Hour} {
				now := t0.Add(at)
				c.Due(now)
				c.Expire(now)
				c.Next()
				checkLimits(t, c)
				hosts := c.Heard(now).Hosts
				if at == 2*time.Hour && (len(hosts) > 0 || len(c.bySource) > 0 || c.addrs > 0) {
					t.Fatalf("After every TTL has passed: %d hosts served, %d senders, %d addresses", len(hosts), len(c.bySource), c.addrs)
				}
				for i, h := range hosts {
					if !ValidHostLabel(h.Label) || slices.Contains(DefaultReserved, h.Label) {
						t.Fatalf("Served invalid or reserved label %q", h.Label)
					}
					if len(h.Addrs) > MaxHostAddrs || slices.Contains(h.Addrs, exclude) {
						t.Fatalf("Served %q with %v", h.Label, h.Addrs)
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
