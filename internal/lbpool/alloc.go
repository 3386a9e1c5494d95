package lbpool

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Port is one port of a Service, as sharing compares them.
type Port struct {
	Protocol string
	Port     int32
}

// Claim is what a Service of type LoadBalancer asks of the pools.
type Claim struct {
	Namespace, Name string
	// Families the Service has (spec.ipFamilies): IPv6 true for IPv6, in
	// the Service's order. The first is required; the others too unless
	// PreferDual (ipFamilyPolicy PreferDualStack: one family is enough
	// when the pools hold no free address of the other).
	Families   []bool
	PreferDual bool
	// Pool names the pool the addresses must come from; "" lets
	// auto-assignment choose.
	Pool string
	// Requested addresses (spec.loadBalancerIP or the annotation): the
	// Service gets exactly these or stays pending.
	Requested []netip.Addr
	// SharingKey: Services with the same key and no port in common may
	// have one address.
	SharingKey string
	Ports      []Port
	// Local: externalTrafficPolicy Local. Services sharing an address
	// must agree on it: the address's holder is chosen by it.
	Local bool
	// Current are the addresses status.loadBalancer.ingress has now.
	Current []netip.Addr
	// Invalid says why the request cannot be read (a malformed address):
	// the Service keeps Current and gets nothing new until it is fixed.
	Invalid string
	// Foreign: another allocator's Service (another class). It holds
	// Current as they are, shares them with nobody, and is given nothing:
	// an address it has is never given to one of ours.
	Foreign bool
}

// Key is the Service's "namespace/name".
func (c *Claim) Key() string { return c.Namespace + "/" + c.Name }

// Result is what one Claim gets.
type Result struct {
	// Addrs to write into the Service's status, sorted; none: pending.
	Addrs []netip.Addr
	// Pending says why the Service has no address (or not all it asked
	// for), "" when it has them.
	Pending string
	// Orphaned are addresses the Service keeps though no pool (or no pool
	// of its namespace) holds them any more: a pool change never moves an
	// address in use; it is reported until the Service lets it go.
	Orphaned []netip.Addr
}

// Allocate gives each claim its addresses. It is deterministic and stable:
// a Service keeps the addresses it has while they are valid for it, so
// calling it again with the results written back changes nothing. Claims
// are decided in this order, each by namespace/name: addresses kept, then
// requested addresses, then auto-assignment (an address already used by a
// Service with the same sharing key first, then the first free address of
// the first pool that serves the namespace).
func Allocate(cfg Config, claims []Claim) []Result {
	order := make([]int, len(claims))
	keys := make([]string, len(claims))
	for i := range order {
		order[i], keys[i] = i, claims[i].Key()
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	a := allocator{cfg: &cfg, claims: claims, users: map[netip.Addr][]int{}}
	res := make([]Result, len(claims))
	done := make([]bool, len(claims))

	// Invalid requests keep what they have, first: nothing is taken
	// from a Service for a typo.
	for _, i := range order {
		if c := &claims[i]; c.Invalid != "" || c.Foreign {
			for _, ip := range c.Current {
				a.users[ip] = append(a.users[ip], i)
			}
			keep := slices.Clone(c.Current)
			slices.SortFunc(keep, netip.Addr.Compare)
			res[i] = Result{Addrs: keep, Pending: c.Invalid}
			done[i] = true
		}
	}
	// Kept: current addresses still valid for their Service.
	for _, i := range order {
		c := &claims[i]
		if done[i] {
			continue
		}
		keep, orphans, ok := a.keepable(c, i)
		if !ok {
			continue
		}
		for _, ip := range keep {
			a.users[ip] = append(a.users[ip], i)
		}
		res[i] = Result{Addrs: keep, Orphaned: orphans}
		// A dual-stack Service short of a family keeps what it has
		// and is given the other below.
		done[i] = a.complete(c, keep)
	}
	// Requested, then automatic.
	for _, requested := range []bool{true, false} {
		for _, i := range order {
			c := &claims[i]
			if done[i] || (len(c.Requested) > 0) != requested {
				continue
			}
			var ips []netip.Addr
			var pending string
			if requested {
				ips, pending = a.request(c, i)
			} else {
				ips, pending = a.assign(c, i, res[i].Addrs)
			}
			for _, ip := range ips {
				if !slices.Contains(res[i].Addrs, ip) {
					a.users[ip] = append(a.users[ip], i)
				}
			}
			slices.SortFunc(ips, netip.Addr.Compare)
			res[i].Addrs, res[i].Pending = ips, pending
		}
	}
	return res
}

type allocator struct {
	cfg    *Config
	claims []Claim
	users  map[netip.Addr][]int // address → claims holding it
}

// shareable reports whether claim i may have ip beside its present users.
func (a *allocator) shareable(ip netip.Addr, i int) (bool, string) {
	c := &a.claims[i]
	for _, j := range a.users[ip] {
		o := &a.claims[j]
		switch {
		case o.Foreign:
			return false, fmt.Sprintf("%s is held by Service %s of another load-balancer class", ip, o.Key())
		case c.SharingKey == "" || c.SharingKey != o.SharingKey:
			return false, fmt.Sprintf("%s is taken by Service %s", ip, o.Key())
		case c.Local != o.Local:
			return false, fmt.Sprintf("%s is shared by Service %s, whose externalTrafficPolicy differs", ip, o.Key())
		}
		for _, p := range c.Ports {
			if slices.Contains(o.Ports, p) {
				return false, fmt.Sprintf("%s is shared by Service %s, which has port %d/%s too", ip, o.Key(), p.Port, p.Protocol)
			}
		}
	}
	return true, ""
}

// eligible reports whether the pool holding ip may give it to c, and why
// not.
func (a *allocator) eligible(c *Claim, ip netip.Addr) (*Pool, string) {
	p := a.cfg.Of(ip)
	switch {
	case p == nil:
		return nil, fmt.Sprintf("%s is in no pool", ip)
	case !p.Serves(c.Namespace):
		return p, fmt.Sprintf("pool %q (holding %s) does not serve namespace %s", p.Name, ip, c.Namespace)
	case c.Pool != "" && p.Name != c.Pool:
		return p, fmt.Sprintf("%s is in pool %q, not in the pool %q the Service names", ip, p.Name, c.Pool)
	}
	return p, ""
}

// keepable returns the current addresses c keeps, those of them no pool
// of its namespace holds any more, and whether c is settled by them.
func (a *allocator) keepable(c *Claim, i int) (keep, orphans []netip.Addr, ok bool) {
	if len(c.Current) == 0 {
		return nil, nil, false
	}
	if len(c.Requested) > 0 && !SameAddrs(c.Requested, c.Current) {
		return nil, nil, false // the request changed: the owner asked for a move
	}
	for n, ip := range c.Current {
		if !slices.Contains(c.Families, ip.Is6()) || slices.ContainsFunc(c.Current[:n], func(o netip.Addr) bool { return o.Is6() == ip.Is6() }) {
			return nil, nil, false
		}
		p, why := a.eligible(c, ip)
		switch {
		case p == nil || (why != "" && !p.Serves(c.Namespace)):
			orphans = append(orphans, ip) // the pools changed under it
		case why != "":
			return nil, nil, false // the Service names another pool
		}
		if ok, _ := a.shareable(ip, i); !ok {
			return nil, nil, false
		}
	}
	keep = slices.Clone(c.Current)
	slices.SortFunc(keep, netip.Addr.Compare)
	return keep, orphans, true
}

// complete reports whether ips cover the families c must have.
func (a *allocator) complete(c *Claim, ips []netip.Addr) bool {
	for n, v6 := range c.Families {
		if slices.ContainsFunc(ips, func(ip netip.Addr) bool { return ip.Is6() == v6 }) {
			continue
		}
		if n == 0 || !c.PreferDual {
			return false
		}
		if a.freeIn(c, v6) {
			return false // an address of that family can be had now
		}
	}
	return true
}

func (a *allocator) request(c *Claim, i int) ([]netip.Addr, string) {
	seen := map[bool]bool{}
	for _, ip := range c.Requested {
		if !slices.Contains(c.Families, ip.Is6()) {
			return nil, fmt.Sprintf("requested %s: the Service has no %s family", ip, Family(ip.Is6()))
		}
		if seen[ip.Is6()] {
			return nil, fmt.Sprintf("requested two %s addresses: a Service has one per family", Family(ip.Is6()))
		}
		seen[ip.Is6()] = true
		if _, why := a.eligible(c, ip); why != "" {
			return nil, "requested " + why
		}
		if ok, why := a.shareable(ip, i); !ok {
			return nil, "requested " + why
		}
	}
	return slices.Clone(c.Requested), ""
}

// assign gives c an address of each family kept lacks. When a required
// family cannot be had, c is pending and keeps only kept: an address in
// use is never taken away for want of another.
func (a *allocator) assign(c *Claim, i int, kept []netip.Addr) ([]netip.Addr, string) {
	ips := slices.Clone(kept)
	for n, v6 := range c.Families {
		if slices.ContainsFunc(kept, func(ip netip.Addr) bool { return ip.Is6() == v6 }) {
			continue
		}
		ip, why := a.pick(c, i, v6)
		if why != "" {
			if n > 0 && c.PreferDual {
				continue
			}
			return slices.Clone(kept), why
		}
		ips = append(ips, ip)
	}
	return ips, ""
}

// pools are those auto-assignment may take from for c.
func (a *allocator) pools(c *Claim) ([]*Pool, string) {
	if c.Pool != "" {
		p := a.cfg.Pool(c.Pool)
		switch {
		case p == nil:
			return nil, fmt.Sprintf("no pool %q", c.Pool)
		case !p.Serves(c.Namespace):
			return nil, fmt.Sprintf("pool %q does not serve namespace %s", c.Pool, c.Namespace)
		}
		return []*Pool{p}, ""
	}
	var out []*Pool
	for k := range a.cfg.Pools {
		if p := &a.cfg.Pools[k]; p.AutoAssign && p.Serves(c.Namespace) {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return nil, "no pool assigns addresses automatically to namespace " + c.Namespace
	}
	return out, ""
}

// pick chooses c's address of one family: one a Service with the same
// sharing key has, where the ports allow, else the first free one.
func (a *allocator) pick(c *Claim, i int, v6 bool) (netip.Addr, string) {
	pools, why := a.pools(c)
	if why != "" {
		return netip.Addr{}, why
	}
	if c.SharingKey != "" {
		var shared []netip.Addr
		for ip, users := range a.users {
			if o := &a.claims[users[0]]; ip.Is6() == v6 && !o.Foreign && o.SharingKey == c.SharingKey {
				shared = append(shared, ip)
			}
		}
		slices.SortFunc(shared, netip.Addr.Compare)
		for _, ip := range shared {
			if _, why := a.eligible(c, ip); why != "" {
				continue
			}
			if ok, _ := a.shareable(ip, i); ok {
				return ip, ""
			}
		}
	}
	for _, p := range pools {
		if ip, ok := a.free(p, v6); ok {
			return ip, ""
		}
	}
	names := make([]string, len(pools))
	for k, p := range pools {
		names[k] = fmt.Sprintf("%q", p.Name)
	}
	return netip.Addr{}, fmt.Sprintf("no free %s address in pool %s", Family(v6), strings.Join(names, ", "))
}

// free returns the first address of p's family v6 nobody holds. It walks
// past the held ones: O(held) per call.
func (a *allocator) free(p *Pool, v6 bool) (netip.Addr, bool) {
	for _, r := range p.Ranges {
		if r.From.Is6() != v6 {
			continue
		}
		for ip := r.From; ip.IsValid() && r.Contains(ip); ip = ip.Next() {
			if len(a.users[ip]) == 0 {
				return ip, true
			}
		}
	}
	return netip.Addr{}, false
}

func (a *allocator) freeIn(c *Claim, v6 bool) bool {
	pools, why := a.pools(c)
	if why != "" {
		return false
	}
	for _, p := range pools {
		if _, ok := a.free(p, v6); ok {
			return true
		}
	}
	return false
}

// Family names an address family as the metrics and messages do.
func Family(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}

// SameAddrs reports whether a and b hold the same addresses, in any order.
func SameAddrs(a, b []netip.Addr) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, netip.Addr.Compare)
	slices.SortFunc(y, netip.Addr.Compare)
	return slices.Equal(x, y)
}

// Usage is one pool's addresses of one family: how many it holds (capped
// as Size is) and how many Services have.
type Usage struct {
	Pool, Family string
	Used         int
	Size         float64
}

// Usages are the pools' usages, in the pools' order, IPv4 before IPv6, for
// each family a pool has addresses of; an address shared by Services
// counts once. The metrics and `infradns status` both show them.
func Usages(cfg Config, res []Result) []Usage {
	type key struct {
		pool string
		v6   bool
	}
	used := map[key]int{}
	seen := map[netip.Addr]bool{}
	for _, r := range res {
		for _, a := range r.Addrs {
			if p := cfg.Of(a); p != nil && !seen[a] {
				seen[a] = true
				used[key{p.Name, a.Is6()}]++
			}
		}
	}
	var out []Usage
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		for _, v6 := range []bool{false, true} {
			if n := p.Size(v6); n > 0 {
				out = append(out, Usage{Pool: p.Name, Family: Family(v6), Used: used[key{p.Name, v6}], Size: n})
			}
		}
	}
	return out
}
