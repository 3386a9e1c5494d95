package lbpool

import (
	"net/netip"
	"strings"
	"testing"
)

const testPools = `pools:
- name: default
  addresses: [192.0.2.10-192.0.2.12, 2001:db8::10-2001:db8::11]
- name: shop-only
  addresses: [198.51.100.1-198.51.100.2]
  namespaces: [shop]
- name: public
  addresses: [203.0.113.7-203.0.113.8]
  autoAssign: false
`

// c builds a claim "ns/name" of IPv4 (change with fields after).
func c(key string, mods ...func(*Claim)) Claim {
	ns, name, _ := strings.Cut(key, "/")
	cl := Claim{Namespace: ns, Name: name, Families: []bool{false}, Ports: []Port{{"TCP", 80}}}
	for _, m := range mods {
		m(&cl)
	}
	return cl
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func current(s ...string) func(*Claim)   { return func(c *Claim) { c.Current = addrs(s...) } }
func requested(s ...string) func(*Claim) { return func(c *Claim) { c.Requested = addrs(s...) } }
func pool(p string) func(*Claim)         { return func(c *Claim) { c.Pool = p } }
func shared(key string, ports ...int32) func(*Claim) {
	return func(c *Claim) {
		c.SharingKey, c.Ports = key, nil
		for _, p := range ports {
			c.Ports = append(c.Ports, Port{"TCP", p})
		}
	}
}
func invalid(why string) func(*Claim) { return func(c *Claim) { c.Invalid = why } }
func foreign(c *Claim)                { c.Foreign = true }
func local(c *Claim)                  { c.Local = true }
func dual(c *Claim)                   { c.Families = []bool{false, true} }
func preferDual(c *Claim)             { c.Families, c.PreferDual = []bool{false, true}, true }
func v6only(c *Claim)                 { c.Families = []bool{true} }

func TestAllocate(t *testing.T) {
	cfg, err := Parse([]byte(testPools))
	if err != nil {
		t.Fatal(err)
	}
	// want: one line per claim, "ADDRS" or "ADDRS pending: WHY" or
	// "ADDRS orphaned: ADDRS".
	for _, tc := range []struct {
		name   string
		claims []Claim
		want   []string
	}{
		{"first free, by namespace/name", []Claim{c("web/b"), c("web/a"), c("shop/z")},
			[]string{"192.0.2.12", "192.0.2.11", "192.0.2.10"}},
		{"a Service keeps its address", []Claim{c("web/a"), c("web/b", current("192.0.2.10"))},
			[]string{"192.0.2.11", "192.0.2.10"}},
		{"pool full", []Claim{c("a/a"), c("a/b"), c("a/c"), c("a/d")},
			[]string{"192.0.2.10", "192.0.2.11", "192.0.2.12", `pending: no free IPv4 address in pool "default"`}},
		{"a namespace's own pool is used when the first is full", []Claim{c("a/a"), c("a/b"), c("a/c"), c("shop/d")},
			[]string{"192.0.2.10", "192.0.2.11", "192.0.2.12", "198.51.100.1"}},
		{"requested", []Claim{c("a/a", requested("192.0.2.12")), c("a/b")},
			[]string{"192.0.2.12", "192.0.2.10"}},
		{"requested beats automatic, not a holder", []Claim{c("a/a", current("192.0.2.10")), c("z/z", requested("192.0.2.10")), c("b/b", requested("192.0.2.11")), c("a/c")},
			[]string{"192.0.2.10", "pending: requested 192.0.2.10 is taken by Service a/a", "192.0.2.11", "192.0.2.12"}},
		{"requested outside every pool", []Claim{c("a/a", requested("10.0.0.1"))},
			[]string{"pending: requested 10.0.0.1 is in no pool"}},
		{"requested in a pool of other namespaces", []Claim{c("web/a", requested("198.51.100.1"))},
			[]string{`pending: requested pool "shop-only" (holding 198.51.100.1) does not serve namespace web`}},
		{"requested from a pool that does not auto-assign", []Claim{c("web/a", requested("203.0.113.8"))},
			[]string{"203.0.113.8"}},
		{"requested family the Service lacks", []Claim{c("web/a", requested("2001:db8::10"))},
			[]string{"pending: requested 2001:db8::10: the Service has no IPv6 family"}},
		{"a named pool", []Claim{c("web/a", pool("public")), c("web/b", pool("public"))},
			[]string{"203.0.113.7", "203.0.113.8"}},
		{"an unknown pool", []Claim{c("web/a", pool("nope"))},
			[]string{`pending: no pool "nope"`}},
		{"a named pool of other namespaces", []Claim{c("web/a", pool("shop-only"))},
			[]string{`pending: pool "shop-only" does not serve namespace web`}},
		{"a Service naming another pool moves", []Claim{c("web/a", pool("public"), current("192.0.2.10"))},
			[]string{"203.0.113.7"}},
		{"a changed request moves", []Claim{c("web/a", requested("192.0.2.12"), current("192.0.2.10"))},
			[]string{"192.0.2.12"}},
		{"sharing: same key, other ports", []Claim{c("a/tcp", shared("dns", 53)), c("a/udp", shared("dns", 5353)), c("a/web")},
			[]string{"192.0.2.10", "192.0.2.10", "192.0.2.11"}},
		{"sharing: a port in common", []Claim{c("a/one", shared("dns", 53)), c("a/two", shared("dns", 53))},
			[]string{"192.0.2.10", "192.0.2.11"}},
		{"sharing: other keys", []Claim{c("a/one", shared("x", 53)), c("a/two", shared("y", 54))},
			[]string{"192.0.2.10", "192.0.2.11"}},
		{"sharing: policies differ", []Claim{c("a/one", shared("x", 53)), c("a/two", shared("x", 54), local)},
			[]string{"192.0.2.10", "192.0.2.11"}},
		{"sharing a requested address", []Claim{c("a/one", shared("x", 53), requested("192.0.2.12")), c("a/two", shared("x", 54), requested("192.0.2.12"))},
			[]string{"192.0.2.12", "192.0.2.12"}},
		{"requested address shared without a key", []Claim{c("a/one", current("192.0.2.12")), c("a/two", requested("192.0.2.12"))},
			[]string{"192.0.2.12", "pending: requested 192.0.2.12 is taken by Service a/one"}},
		{"two holders of one address: the first keeps it", []Claim{c("a/two", current("192.0.2.10")), c("a/one", current("192.0.2.10"))},
			[]string{"192.0.2.11", "192.0.2.10"}},
		{"dual stack", []Claim{c("a/a", dual), c("a/b", dual), c("a/c", dual)},
			[]string{"192.0.2.10 2001:db8::10", "192.0.2.11 2001:db8::11", `pending: no free IPv6 address in pool "default"`}},
		{"prefer dual stack", []Claim{c("a/a", dual), c("a/b", dual), c("a/c", preferDual)},
			[]string{"192.0.2.10 2001:db8::10", "192.0.2.11 2001:db8::11", "192.0.2.12"}},
		{"prefer dual stack gets its second family when one frees", []Claim{c("a/c", preferDual, current("192.0.2.12"))},
			[]string{"192.0.2.12 2001:db8::10"}},
		{"dual stack short of a family keeps what it has", []Claim{c("a/a", dual, current("2001:db8::10")), c("a/b", dual, current("2001:db8::11")), c("a/c", dual, current("2001:db8::12"))},
			[]string{"192.0.2.10 2001:db8::10", "192.0.2.11 2001:db8::11", "192.0.2.12 2001:db8::12 orphaned: 2001:db8::12"}},
		{"IPv6 only", []Claim{c("a/a", v6only)},
			[]string{"2001:db8::10"}},
		{"an address no pool holds any more is kept and reported", []Claim{c("a/a", current("10.1.1.1")), c("a/b")},
			[]string{"10.1.1.1 orphaned: 10.1.1.1", "192.0.2.10"}},
		{"an address its namespace's pools no longer hold is kept and reported", []Claim{c("web/a", current("198.51.100.2"))},
			[]string{"198.51.100.2 orphaned: 198.51.100.2"}},
		{"an unreadable request keeps the current address", []Claim{c("a/a", current("192.0.2.11"), invalid("x")), c("a/b"), c("a/c")},
			[]string{"192.0.2.11 pending: x", "192.0.2.10", "192.0.2.12"}},
		{"another allocator's address is never given", []Claim{c("a/a"), c("a/m", foreign, current("192.0.2.10")), c("a/r", requested("192.0.2.10"))},
			[]string{"192.0.2.11", "192.0.2.10", "pending: requested 192.0.2.10 is held by Service a/m of another load-balancer class"}},
		{"a current address of a family the Service no longer has", []Claim{c("a/a", current("2001:db8::10"))},
			[]string{"192.0.2.10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Allocate(cfg, tc.claims)
			for i, r := range res {
				if got := resultString(r); got != tc.want[i] {
					t.Errorf("%s: %q, want %q", tc.claims[i].Key(), got, tc.want[i])
				}
			}
			// Written back, the results change nothing.
			again := make([]Claim, len(tc.claims))
			for i, cl := range tc.claims {
				again[i] = cl
				again[i].Current = res[i].Addrs
			}
			for i, r := range Allocate(cfg, again) {
				if resultString(r) != resultString(res[i]) {
					t.Errorf("%s, written back: %q, was %q", tc.claims[i].Key(), resultString(r), resultString(res[i]))
				}
			}
		})
	}
}

func resultString(r Result) string {
	var parts []string
	for _, a := range r.Addrs {
		parts = append(parts, a.String())
	}
	if r.Pending != "" {
		parts = append(parts, "pending: "+r.Pending)
	}
	if len(r.Orphaned) > 0 {
		var o []string
		for _, a := range r.Orphaned {
			o = append(o, a.String())
		}
		parts = append(parts, "orphaned: "+strings.Join(o, " "))
	}
	return strings.Join(parts, " ")
}
