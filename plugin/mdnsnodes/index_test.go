package mdnsnodes

import (
	"testing"

	"github.com/infradns/infradns/internal/mdns"
	"github.com/infradns/infradns/internal/records"
)

func heardHost(label string, ss ...string) mdns.HeardHost {
	return mdns.HeardHost{Label: label, Addrs: addrs(ss...)}
}

func TestHeardIndex(t *testing.T) {
	tests := []struct {
		name  string
		heard mdns.Heard
		want  map[string]records.Set
	}{
		{name: "nothing heard", want: map[string]records.Set{}},
		{name: "both families, IPv4 as 4 bytes",
			heard: mdns.Heard{Hosts: []mdns.HeardHost{heardHost("master-0", "198.51.100.11", "2001:db8:1::11")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11", "2001:db8:1::11")}},
		{name: "each host by its label",
			heard: mdns.Heard{Hosts: []mdns.HeardHost{
				heardHost("master-0", "198.51.100.11"),
				heardHost("worker-0", "198.51.100.21", "198.51.100.22"),
				heardHost("worker-1", "2001:db8:1::23"),
			}},
			want: map[string]records.Set{
				"master-0": set("198.51.100.11"),
				"worker-0": set("198.51.100.21", "198.51.100.22"),
				"worker-1": set("2001:db8:1::23"),
			}},
		{name: "unusable addresses dropped, as for the API's Nodes",
			heard: mdns.Heard{Hosts: []mdns.HeardHost{heardHost("master-0", "0.0.0.0", "198.51.100.11", "ff02::fb")}},
			want:  map[string]records.Set{"master-0": set("198.51.100.11")}},
		{name: "a host without a usable address is not served",
			heard: mdns.Heard{Hosts: []mdns.HeardHost{heardHost("master-0", "224.0.0.251", "::"), heardHost("master-1", "198.51.100.12")}},
			want:  map[string]records.Set{"master-1": set("198.51.100.12")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix := heardIndex(tc.heard)
			if ix.Len() != len(tc.want) {
				t.Errorf("Served %v, want %v", ix.nodes, tc.want)
			}
			for l, w := range tc.want {
				if g, ok := ix.Lookup(l); !ok || !sameSet(g, w) {
					t.Errorf("%s: %v, want %v", l, g, w)
				}
			}
			if s, ok := ix.Lookup("master-9"); ok {
				t.Errorf("master-9: %v, want no node", s)
			}
		})
	}
}

// TestNodeIndexNil is the index before anything is published: ServeDNS
// reads it before the first snapshot arrives.
func TestNodeIndexNil(t *testing.T) {
	var ix *nodeIndex
	if ix.Len() != 0 {
		t.Errorf("Len = %d, want 0", ix.Len())
	}
	if s, ok := ix.Lookup("master-0"); ok || !s.Empty() {
		t.Errorf("Lookup = %v, %v; want nothing", s, ok)
	}
}

// TestLookupAllocs guards the query path: reading the published index and
// finding a node allocates nothing, whichever source the node came from.
func TestLookupAllocs(t *testing.T) {
	m := New()
	heard := heardIndex(mdns.Heard{Hosts: []mdns.HeardHost{heardHost("master-0", "198.51.100.11")}})
	m.index.Store(merge(heard, map[string]records.Set{"worker-0": set("198.51.100.21")}, false))
	for _, l := range []string{"master-0", "worker-0", "master-9"} {
		if n := testing.AllocsPerRun(100, func() { m.index.Load().Lookup(l) }); n != 0 {
			t.Errorf("Lookup(%q): %v allocations, want 0", l, n)
		}
	}
}
