package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

func ips(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, x := range s {
		out[i] = netip.MustParseAddr(x)
	}
	return out
}

func spec() Spec {
	return Spec{
		Name:        "ocp4",
		Domain:      "ocp4.example.com",
		APIVIPs:     ips("192.0.2.5", "2001:db8::5"),
		IngressVIPs: ips("192.0.2.10", "2001:db8::10"),
		Node:        "master-0",
		Interface:   "eth0",
	}
}

// TestNewRefuses lists every Spec the model refuses, with the exact error:
// the key (as the cluster file spells it) and the reason.
func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Spec)
		want string
	}{
		{"no cluster name", func(s *Spec) { s.Name = "" }, `cluster: missing: the cluster name`},
		{"cluster name with a dot", func(s *Spec) { s.Name = "a.b" }, `cluster: "a.b": at most 63 letters, digits, '-' and '_'`},
		{"domain with a command", func(s *Spec) { s.Domain = "$(id).example.com" }, `domain: "$(id).example.com": label "$(id)" has '$': only letters, digits and '-' are allowed`},
		{"domain with a semicolon", func(s *Spec) { s.Domain = "a;b.example.com" }, `domain: "a;b.example.com": label "a;b" has ';': only letters, digits and '-' are allowed`},
		{"domain with a hash", func(s *Spec) { s.Domain = "a#.example.com" }, `domain: "a#.example.com": label "a#" has '#': only letters, digits and '-' are allowed`},
		{"domain with a newline", func(s *Spec) { s.Domain = "ocp4.example.com\nfoo" }, `domain: "ocp4.example.com\nfoo": label "com\nfoo" has '\n': only letters, digits and '-' are allowed`},
		{"domain of one label", func(s *Spec) { s.Domain = "cluster" }, `domain: "cluster": a cluster domain has at least two labels (ocp4.example.com)`},
		{"no api vip", func(s *Spec) { s.APIVIPs = nil }, `apiVIPs: missing: give one address per family (IPv4, IPv6 or both)`},
		{"two v4 api vips", func(s *Spec) { s.APIVIPs = ips("192.0.2.5", "192.0.2.6") }, `apiVIPs: 192.0.2.6 is a second IPv4 address: at most one per family`},
		{"api vip 0.0.0.0", func(s *Spec) { s.APIVIPs = ips("0.0.0.0") }, `apiVIPs: 0.0.0.0 cannot be a virtual IP: the unspecified address`},
		{"api vip ::", func(s *Spec) { s.APIVIPs = ips("::") }, `apiVIPs: :: cannot be a virtual IP: the unspecified address`},
		{"api vip loopback", func(s *Spec) { s.APIVIPs = ips("127.0.0.1") }, `apiVIPs: 127.0.0.1 cannot be a virtual IP: a loopback address`},
		{"api vip broadcast", func(s *Spec) { s.APIVIPs = ips("255.255.255.255") }, `apiVIPs: 255.255.255.255 cannot be a virtual IP: in 240.0.0.0/4 (reserved, and 255.255.255.255 is the broadcast address)`},
		{"api vip VRRP's group", func(s *Spec) { s.APIVIPs = ips("224.0.0.18") }, `apiVIPs: 224.0.0.18 cannot be a virtual IP: a multicast address`},
		{"api vip VRRP's v6 group", func(s *Spec) { s.APIVIPs = ips("ff02::12") }, `apiVIPs: ff02::12 cannot be a virtual IP: a multicast address`},
		{"api vip zoned", func(s *Spec) { s.APIVIPs = ips("fd00::5%eth0") }, `apiVIPs: fd00::5%eth0 cannot be a virtual IP: a zoned address (%eth0)`},
		{"api vip link-local", func(s *Spec) { s.APIVIPs = ips("169.254.1.1") }, `apiVIPs: 169.254.1.1 cannot be a virtual IP: a link-local address`},
		{"api vip this-network", func(s *Spec) { s.APIVIPs = ips("0.1.2.3") }, `apiVIPs: 0.1.2.3 cannot be a virtual IP: in 0.0.0.0/8 (this network)`},
		{"ingress vip listed twice", func(s *Spec) { s.IngressVIPs = ips("192.0.2.10", "192.0.2.10") }, `ingressVIPs: 192.0.2.10 is listed twice`},
		{"ingress vip multicast", func(s *Spec) { s.IngressVIPs = ips("ff02::12") }, `ingressVIPs: ff02::12 cannot be a virtual IP: a multicast address`},
		{"api vip equal to ingress vip", func(s *Spec) { s.IngressVIPs = ips("192.0.2.5") }, `ingressVIPs, apiVIPs: 192.0.2.5 is an API VIP too: each VIP must be used once`},
		{"too many ingress vips", func(s *Spec) {
			s.IngressVIPs = nil
			for i := range MaxIngressGroups + 1 {
				s.IngressVIPs = append(s.IngressVIPs, netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}))
			}
		}, `ingressVIPs: 192.0.2.26: more than 16 IPv4 addresses`},
		{"lb port equals health port", func(s *Spec) { s.LBPort, s.HealthPort = 9454, 9454 }, `lbPort, lbHealthPort: both are 9454: haproxy needs two ports`},
		{"lb port equals default health port", func(s *Spec) { s.LBPort = DefaultHealthPort }, `lbPort, lbHealthPort: both are 9454: haproxy needs two ports`},
		{"lb port is kube-apiserver's", func(s *Spec) { s.LBPort = 6443 }, `lbPort, apiPort: 6443 is kube-apiserver's port (apiPort) on the control-plane nodes, where haproxy listens too: pick another (default 9445)`},
		{"lb port is the api port", func(s *Spec) { s.APIPort, s.LBPort = 8443, 8443 }, `lbPort, apiPort: 8443 is kube-apiserver's port (apiPort) on the control-plane nodes, where haproxy listens too: pick another (default 9445)`},
		{"health port is the api port", func(s *Spec) { s.HealthPort = DefaultAPIPort }, `lbHealthPort, apiPort: 6443 is kube-apiserver's port (apiPort) on the control-plane nodes, where haproxy listens too: pick another (default 9454)`},
		{"lb port is a backend's port", func(s *Spec) {
			s.LBPort, s.StaticBackends = 8443, []netip.AddrPort{netip.MustParseAddrPort("198.51.100.11:8443")}
		}, `lbPort, apiServers: 8443 is the port of apiserver 198.51.100.11:8443, on the control-plane nodes where haproxy listens too: pick another (default 9445)`},
		{"backend 0.0.0.0", func(s *Spec) { s.StaticBackends = []netip.AddrPort{netip.MustParseAddrPort("0.0.0.0:6443")} }, `apiServers: 0.0.0.0:6443: the unspecified address`},
		{"backend multicast", func(s *Spec) { s.StaticBackends = []netip.AddrPort{netip.MustParseAddrPort("224.0.0.1:6443")} }, `apiServers: 224.0.0.1:6443: a multicast address`},
		{"backend is the api vip", func(s *Spec) { s.StaticBackends = []netip.AddrPort{netip.MustParseAddrPort("192.0.2.5:6443")} }, `apiServers, apiVIPs: 192.0.2.5 is a VIP: an apiserver is a node's own address`},
		{"v2 sub-second", func(s *Spec) { s.VRRP.Version = 2 }, `vrrpVersion, advertInterval: advert interval 60ms: vrrp version 2 needs whole seconds in [1s, 255s]`},
		{"v3 15ms", func(s *Spec) { s.VRRP.AdvertInterval = 15 * time.Millisecond }, `vrrpVersion, advertInterval: advert interval 15ms: vrrp version 3 needs a multiple of 10ms in [10ms, 40.95s]`},
		{"version 4", func(s *Spec) { s.VRRP.Version = 4 }, `vrrpVersion, advertInterval: vrrp version 4: must be 2 or 3`},
		{"unknown failover profile", func(s *Spec) { s.VRRP.Failover = "slow" }, `failover: "slow": must be fast or stable`},
		{"relative track dir", func(s *Spec) { s.TrackDir = "run/infradns" }, `trackDir: "run/infradns" must be a clean absolute path of letters, digits and ._/+@-`},
		{"track dir with a quote", func(s *Spec) { s.TrackDir = `/run/"x` }, `trackDir: "/run/\"x" must be a clean absolute path of letters, digits and ._/+@-`},
		{"track dir with a newline", func(s *Spec) { s.TrackDir = "/run/x\ny" }, `trackDir: "/run/x\ny" must be a clean absolute path of letters, digits and ._/+@-`},
		{"track dir not clean", func(s *Spec) { s.TrackDir = "/run/../etc" }, `trackDir: "/run/../etc" must be a clean absolute path of letters, digits and ._/+@-`},
		{"ingress service with a selector", func(s *Spec) { s.IngressService = "ns/a,b=c" }, `ingressService: "ns/a,b=c" is not NAMESPACE/NAME (two DNS labels: lower-case letters, digits, inner '-')`},
		{"ingress service without a namespace", func(s *Spec) { s.IngressService = "router" }, `ingressService: "router" is not NAMESPACE/NAME (two DNS labels: lower-case letters, digits, inner '-')`},
		{"health check without a host", func(s *Spec) { s.Health = map[string]string{"api": "http://"} }, `healthChecks: api: "http://" is not an http(s) URL with a host, or none`},
		{"health check not http", func(s *Spec) { s.Health = map[string]string{"ingress": "127.0.0.1:1936"} }, `healthChecks: ingress: "127.0.0.1:1936" is not an http(s) URL with a host, or none`},
		{"health check of an unknown kind", func(s *Spec) { s.Health = map[string]string{"dns": "none"} }, `healthChecks: unknown check "dns": api or ingress`},
		{"node name with a space and brace", func(s *Spec) { s.Node = "a b}" }, `node: "a b}" is not a Node name: lower-case letters, digits, '-' and '.' (RFC 1123)`},
		{"interface with a quote", func(s *Spec) { s.Interface = `eth"0` }, `interface: "eth\"0" is not an interface name (at most 15 letters, digits, '_', '.', '@', '-')`},
		{"interface with a newline", func(s *Spec) { s.Interface = "eth0\n}" }, `interface: "eth0\n}" is not an interface name (at most 15 letters, digits, '_', '.', '@', '-')`},
		{"interface too long", func(s *Spec) { s.Interface = "abcdefghijklmnop" }, `interface: "abcdefghijklmnop" is not an interface name (at most 15 letters, digits, '_', '.', '@', '-')`},
		{"vip is the node's own address", func(s *Spec) { s.NodeIPs = ips("192.0.2.10") }, `ingressVIPs, nodeIPs: 192.0.2.10 is this node's own address: a VIP must be an address no node has`},
		{"equal router id overrides", func(s *Spec) { s.RouterIDs = RouterIDs{API: 7, Ingress: []uint8{7}} }, `routerIDs: api and ingress are both 7`},
		{"more ingress ids than groups", func(s *Spec) { s.RouterIDs = RouterIDs{Ingress: []uint8{7, 8}} }, `routerIDs: 2 ingress IDs for 1 ingress VIPs per family`},
		{"services in bgp mode", func(s *Spec) {
			s.Mode, s.BGP = ModeBGP, BGP{ASN: 64513, Peers: []BGPPeer{{Address: netip.MustParseAddr("198.51.100.1"), ASN: 64512}}}
			s.APIVIPs, s.IngressVIPs = ips("192.0.2.5"), ips("192.0.2.10")
			s.Services = &ServicesVRRP{}
		}, `services, vipMode: the Services' addresses are held over VRRP in vipMode vrrp only: in bgp mode each eligible node announces them itself (lbconfig's services option), with no VRRP group: leave services out`},
		{"services: too many groups", func(s *Spec) { s.Services = &ServicesVRRP{Groups: MaxServiceGroups + 1} }, `services.groups: 17: want 1 to 16 (0: 4)`},
		{"services: a local ID listed twice", func(s *Spec) { s.Services = &ServicesVRRP{LocalIDs: []uint8{10, 10}} }, `services.localIDs: 10 is listed twice: each Local Service needs an ID of its own`},
		{"services: a local ID is the API's", func(s *Spec) { s.Services = &ServicesVRRP{LocalIDs: []uint8{10, 222}} }, `services.localIDs: 222 is the router ID of the API or an ingress group`},
		{"services: a local ID is an ingress group's", func(s *Spec) {
			s.IngressVIPs = ips("192.0.2.10", "192.0.2.11")
			s.Services = &ServicesVRRP{LocalIDs: []uint8{35}} // ocp4-ingress-2's
		}, `services.localIDs: 35 is the router ID of the API or an ingress group`},
		// The first ingress group's ID is kept for it without an ingress
		// VIP: adding one later must not renumber the Services' groups.
		{"services: a local ID is the ingress ID, no ingress VIP", func(s *Spec) {
			s.IngressVIPs = nil
			s.Services = &ServicesVRRP{LocalIDs: []uint8{61}}
		}, `services.localIDs: 61 is the router ID of the API or an ingress group`},
		{"services: no ID left for the shared groups", func(s *Spec) {
			s.Services = &ServicesVRRP{Groups: 1, LocalIDs: slices.DeleteFunc(idRange(1, 255), func(id uint8) bool { return id == 222 || id == 61 })}
		}, `services: no free VRRP router ID left for services: the API, ingress and Services groups and the localIDs take all 255`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := spec()
			tc.mod(&s)
			_, err := New(s)
			if err == nil {
				t.Fatalf("New accepted %+v", s)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("Err %T is not a *cluster.Error", err)
			}
			if err.Error() != tc.want {
				t.Errorf("Err =\n  %s\nwant\n  %s", err, tc.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	s := spec()
	s.StaticBackends = []netip.AddrPort{netip.AddrPortFrom(netip.MustParseAddr("::ffff:198.51.100.11"), 0)}
	s.Domain = "OCP4.Example.COM."
	s.Node = "Master-0"
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	got := m.Spec()
	if got.APIPort != 6443 || got.LBPort != 9445 || got.HealthPort != 9454 || got.VRRP.Version != 3 ||
		got.VRRP.AdvertInterval != 60*time.Millisecond || got.TrackDir != "/run/infradns" ||
		got.IngressService != "openshift-ingress/router-internal-default" {
		t.Errorf("Defaults = %+v", got)
	}
	if got.StaticBackends[0] != netip.MustParseAddrPort("198.51.100.11:6443") {
		t.Errorf("Static backend = %v, want unmapped with the API port", got.StaticBackends[0])
	}
	if got.Domain != "ocp4.example.com" || got.Node != "master-0" {
		t.Errorf("Domain %q, node %q: want lower case without the root dot", got.Domain, got.Node)
	}
	if m.HealthURL(CheckAPI) != "http://127.0.0.1:9454/haproxy_ready" || m.HealthURL(CheckIngress) != DefaultIngressHealthURL {
		t.Errorf("Health URLs %q %q", m.HealthURL(CheckAPI), m.HealthURL(CheckIngress))
	}
	if ns, n := m.IngressService(); ns != "openshift-ingress" || n != "router-internal-default" {
		t.Errorf("Ingress service %s/%s", ns, n)
	}
}

// TestFailoverProfiles: a profile sets the advert interval unless one is
// given; stable's is valid for VRRP version 2 as well.
func TestFailoverProfiles(t *testing.T) {
	tests := []struct {
		failover string
		version  int
		advert   time.Duration
		want     time.Duration
	}{
		{"", 3, 0, 60 * time.Millisecond},
		{"fast", 3, 0, 60 * time.Millisecond},
		{"stable", 3, 0, time.Second},
		{"stable", 2, 0, time.Second},
		{"stable", 3, 500 * time.Millisecond, 500 * time.Millisecond},
		{"fast", 3, 100 * time.Millisecond, 100 * time.Millisecond},
	}
	for _, tc := range tests {
		s := spec()
		s.VRRP.Failover, s.VRRP.Version, s.VRRP.AdvertInterval = tc.failover, tc.version, tc.advert
		m, err := New(s)
		if err != nil {
			t.Errorf("%q v%d %v: %v", tc.failover, tc.version, tc.advert, err)
			continue
		}
		if got := m.Spec().VRRP.AdvertInterval; got != tc.want {
			t.Errorf("%q v%d %v: advert interval %v, want %v", tc.failover, tc.version, tc.advert, got, tc.want)
		}
		if want := cmp.Or(tc.failover, FailoverFast); m.Spec().VRRP.Failover != want {
			t.Errorf("%q: profile %q, want %q", tc.failover, m.Spec().VRRP.Failover, want)
		}
	}
}

// TestRouterIDs: the first two are OpenShift's (runtimecfg vr-ids), the
// others derived and stable when more groups are added.
func TestRouterIDs(t *testing.T) {
	tests := []struct {
		cluster string
		n       int
		o       RouterIDs
		want    []uint8
	}{
		{"ocp4", 1, RouterIDs{}, []uint8{222, 61}},
		{"ocp4", 0, RouterIDs{}, []uint8{222}},
		// Fletcher-8 of ocp4-ingress-2, -3, -4, plus one.
		{"ocp4", 3, RouterIDs{}, []uint8{222, 61, 35, 52}},
		{"ocp4", 4, RouterIDs{}, []uint8{222, 61, 35, 52, 69}},
		{"ocp4", 3, RouterIDs{API: 14}, []uint8{14, 61, 35, 52}},
		// An explicit ID wins; the computed one it takes steps up.
		{"ocp4", 3, RouterIDs{Ingress: []uint8{0, 61}}, []uint8{222, 62, 61, 52}},
		{"ocp4", 2, RouterIDs{API: 61}, []uint8{61, 62, 35}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.cluster, tc.n, tc.o), func(t *testing.T) {
			got, err := RouterIDsFor(tc.cluster, tc.n, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("IDs = %v, want %v", got, tc.want)
			}
		})
	}
	// No two groups of any cluster share an ID, whatever the count.
	for _, name := range []string{"ocp4", "a", "prod-eu-1", "x_y"} {
		ids, err := RouterIDsFor(name, MaxIngressGroups, RouterIDs{})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[uint8]bool{}
		for _, id := range ids {
			if id == 0 || seen[id] {
				t.Errorf("%s: IDs %v repeat or use 0", name, ids)
			}
			seen[id] = true
		}
	}
}

func TestGroups(t *testing.T) {
	s := spec()
	s.IngressVIPs = ips("2001:db8::10", "192.0.2.10", "192.0.2.11", "192.0.2.12", "2001:db8::11")
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range m.Groups() {
		got = append(got, fmt.Sprintf("%s/%s/%d/%s/%d:%v", g.Name, g.Holders, g.RouterID, g.Check, g.Index, g.VIPs))
	}
	want := []string{
		"api/control-plane/222/api/0:[192.0.2.5 2001:db8::5]",
		"ingress/routers/61/ingress/0:[192.0.2.10 2001:db8::10]",
		"ingress-2/routers/35/ingress/1:[192.0.2.11 2001:db8::11]",
		"ingress-3/routers/52/ingress/2:[192.0.2.12]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Groups =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestModelServices: the Services' VRRP settings and the router IDs they
// step past, as the model hands them out: copies, nil when not set.
func TestModelServices(t *testing.T) {
	m, err := New(spec())
	if err != nil {
		t.Fatal(err)
	}
	if m.Services() != nil || m.Spec().Services != nil {
		t.Errorf("Services = %+v, want nil when not set", m.Services())
	}
	if got := m.RouterIDsTaken(); !slices.Equal(got, []uint8{222, 61}) {
		t.Errorf("RouterIDsTaken = %v, want [222 61]", got)
	}

	s := spec()
	s.IngressVIPs = ips("192.0.2.10", "192.0.2.11", "192.0.2.12")
	s.RouterIDs.API = 7
	s.Services = &ServicesVRRP{Groups: 2, LocalIDs: []uint8{10, 11}}
	if m, err = New(s); err != nil {
		t.Fatal(err)
	}
	s.Services.LocalIDs[0] = 99 // the caller's copy
	got := m.Services()
	if got == nil || got.Groups != 2 || !slices.Equal(got.LocalIDs, []uint8{10, 11}) {
		t.Fatalf("Services = %+v, want 2 groups, local IDs [10 11]", got)
	}
	got.LocalIDs[0] = 98
	if again := m.Services(); again.LocalIDs[0] != 10 || m.Spec().Services.LocalIDs[0] != 10 {
		t.Errorf("the model's Services changed through a copy: %+v", again)
	}
	if got := m.RouterIDsTaken(); !slices.Equal(got, []uint8{7, 61, 35, 52}) {
		t.Errorf("RouterIDsTaken = %v, want [7 61 35 52]", got)
	}
	// The settings survive WithNode, and the IDs are those ServiceGroups
	// is given.
	wn, err := m.WithNode("master-1", "eth1", nil)
	if err != nil || wn.Services() == nil || wn.Services().Groups != 2 {
		t.Fatalf("WithNode: %v, Services %+v", err, wn.Services())
	}
	gs, err := ServiceGroups(m.Name(), *m.Services(), m.RouterIDsTaken(), nil)
	if err != nil || len(gs) != 2 {
		t.Fatalf("ServiceGroups: %v, %d groups", err, len(gs))
	}
	for _, g := range gs {
		if slices.Contains(m.RouterIDsTaken(), g.RouterID) || slices.Contains([]uint8{10, 11}, g.RouterID) {
			t.Errorf("group %s on taken ID %d", g.Name, g.RouterID)
		}
	}
}

// TestNodeIPsNotGiven: a Spec without node IPs keeps them nil through New
// and Spec, which is how lbconfig knows to find them on the host (and rank
// a bootstrap node by them).
func TestNodeIPsNotGiven(t *testing.T) {
	s := spec()
	s.NodeIPs = nil
	m, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Spec().NodeIPs; got != nil {
		t.Errorf("NodeIPs = %#v, want nil", got)
	}
	s.NodeIPs = ips("198.51.100.11")
	if m, _ = New(s); len(m.Spec().NodeIPs) != 1 {
		t.Errorf("NodeIPs = %v", m.Spec().NodeIPs)
	}
}
