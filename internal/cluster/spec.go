package cluster

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Spec is what a front end read, before any check: the cluster file's keys
// and lbconfig's options fill the same fields. Zero values mean "default".
type Spec struct {
	// Name is the cluster name: router IDs, instance, file and Lease names.
	Name string
	// Domain is the cluster's DNS domain; optional (lbconfig has none).
	Domain string
	// APIVIPs: one or two addresses, at most one per family.
	APIVIPs []netip.Addr
	// IngressVIPs: any number per family, up to MaxIngressGroups. The
	// i-th address of each family makes up ingress group i.
	IngressVIPs []netip.Addr
	// RouterIDs override the computed VRRP router IDs; 0 keeps one.
	RouterIDs RouterIDs
	// APIPort is the port of static backends given without one; LBPort is
	// haproxy's API frontend and HealthPort its monitor-uri.
	APIPort, LBPort, HealthPort uint16
	// StaticBackends serve the API before it can be asked (bootstrap).
	StaticBackends []netip.AddrPort
	// Mode is ModeVRRP (default) or ModeBGP; BGP holds BGP mode's
	// settings.
	Mode string
	VRRP VRRP
	BGP  BGP
	// TrackDir holds the health files keepalived watches.
	TrackDir string
	// IngressService ("NAMESPACE/NAME") marks, by its ready endpoints, the
	// nodes that may hold an ingress VIP.
	IngressService string
	// Health maps a check ("api", "ingress") to the URL whose 2xx answer
	// keeps the groups it gates eligible; "none" leaves the track file to
	// someone else; unset is the default.
	Health map[string]string
	// Services, when set, holds the addresses of the Services of type
	// LoadBalancer over VRRP (ServiceGroups); nil: they are not (VRRP
	// mode renders the API and ingress groups alone). BGP mode announces
	// the Services its own way and refuses it.
	Services *ServicesVRRP

	// Node, Interface and NodeIPs are what one node adds: its Node name,
	// the interface its VIPs live on ("auto": found at start from the API
	// VIP's subnet) and, for unicast VRRP, its own addresses.
	Node      string
	Interface string
	NodeIPs   []netip.Addr
}

// VRRP are the settings of the VRRP renderer.
type VRRP struct {
	// Version is 3 (sub-second adverts, no authentication) or 2
	// (whole-second adverts, PASS authentication as OpenShift sets it).
	Version int
	// Failover is the timer profile: FailoverFast (the default) or
	// FailoverStable. It sets AdvertInterval when that is not given.
	Failover       string
	AdvertInterval time.Duration
	// Unicast lists peers from Node objects instead of using multicast.
	Unicast bool
}

// Failover profiles. fast moves a VIP ~0.17 s after its holder stops; any
// stop longer than the master-down interval (0.19 s at 60 ms adverts) moves
// it, a VM stun or live migration included. stable waits ~3 s (1 s
// adverts): a pause shorter than that moves nothing and costs only the
// pause itself, for sites that prefer fewer moves to faster ones (VMs that
// migrate, oversubscribed hosts).
const (
	FailoverFast   = "fast"
	FailoverStable = "stable"
	// StableAdvertInterval is the stable profile's advert interval; also
	// valid for VRRP version 2.
	StableAdvertInterval = time.Second
)

// RouterIDs are explicit VRRP router IDs: API for the API group, Ingress[i]
// for ingress group i. 0, or an index past the list, keeps the computed one.
type RouterIDs struct {
	API     uint8
	Ingress []uint8
}

// Defaults, chosen from the lab figures in docs/lbconfig-design.md: 0.06 s adverts
// move a VIP in ~0.16 s after a crash (20 rounds, worst client outage 0.2 s)
// and held two 30-minute soaks on a 2-core machine saturated by a fuzzer
// (0 state changes); 0.05 s flapped under the heaviest load.
const (
	DefaultAPIPort          = 6443
	DefaultLBPort           = 9445
	DefaultHealthPort       = 9454
	DefaultVRRPVersion      = 3
	DefaultAdvertInterval   = 60 * time.Millisecond
	DefaultTrackDir         = "/run/infradns"
	DefaultIngressService   = "openshift-ingress/router-internal-default"
	DefaultIngressHealthURL = "http://127.0.0.1:1936/healthz/ready"
	// MaxIngressGroups bounds the ingress VIPs per family: each is a VRRP
	// instance with a router ID of its own, out of 255 shared with every
	// other VRRP user of the LAN.
	MaxIngressGroups = 16
)

// Health checks a group can be gated by.
const (
	CheckAPI     = "api"
	CheckIngress = "ingress"
	// HealthNone leaves a check's track file to another agent.
	HealthNone = "none"
)

// Model is a checked Spec with its defaults filled in and its VIP groups
// built. Only New makes one, so whatever holds a *Model holds a valid one.
type Model struct {
	spec   Spec
	groups []Group
	// taken are the router IDs of "api" and the ingress groups, the first
	// ingress group's even without an ingress VIP (RouterIDsTaken).
	taken []uint8
}

// New checks a Spec and builds the model. The error is an *Error naming the
// Spec's keys in the cluster file's words; front ends translate them.
func New(s Spec) (*Model, error) {
	s = s.withDefaults()
	if err := s.check(); err != nil {
		return nil, err
	}
	groups, err := buildGroups(s)
	if err != nil {
		return nil, err
	}
	taken, err := RouterIDsFor(s.Name, max(1, IngressGroups(s.IngressVIPs)), s.RouterIDs)
	if err != nil {
		return nil, err
	}
	if err := s.checkServices(taken); err != nil {
		return nil, err
	}
	return &Model{spec: s, groups: groups, taken: taken}, nil
}

// checkServices: the Services' VRRP settings are sound, held in VRRP mode
// only, and their k shared groups and LocalIDs fit beside the API and
// ingress IDs (taken) on the link, so ServiceGroups cannot fail on them
// later whatever the Services are.
func (s Spec) checkServices(taken []uint8) error {
	if s.Services == nil {
		return nil
	}
	if s.Mode == ModeBGP {
		return errorf([]string{KeyServices, KeyVIPMode}, "the Services' addresses are held over VRRP in vipMode %s only: in %s mode each eligible node announces them itself (lbconfig's services option), with no VRRP group: leave %s out", ModeVRRP, ModeBGP, KeyServices)
	}
	cfg := *s.Services
	if err := cfg.Check(); err != nil {
		return err
	}
	for _, id := range cfg.LocalIDs {
		if slices.Contains(taken, id) {
			return keyErr(KeyServiceLocalIDs, "%d is the router ID of the API or an ingress group", id)
		}
	}
	_, err := ServiceGroupIDs(s.Name, cfg.SharedGroups(), slices.Concat(taken, cfg.LocalIDs))
	return err
}

func (s Spec) withDefaults() Spec {
	s.APIVIPs = unmapAll(s.APIVIPs)
	s.IngressVIPs = unmapAll(s.IngressVIPs)
	s.NodeIPs = unmapAll(s.NodeIPs)
	s.StaticBackends = slices.Clone(s.StaticBackends)
	s.APIPort = cmp.Or(s.APIPort, DefaultAPIPort)
	s.LBPort = cmp.Or(s.LBPort, DefaultLBPort)
	s.HealthPort = cmp.Or(s.HealthPort, DefaultHealthPort)
	for i, b := range s.StaticBackends {
		s.StaticBackends[i] = netip.AddrPortFrom(b.Addr().Unmap(), cmp.Or(b.Port(), s.APIPort))
	}
	s.VRRP.Version = cmp.Or(s.VRRP.Version, DefaultVRRPVersion)
	s.VRRP.Failover = cmp.Or(s.VRRP.Failover, FailoverFast)
	if s.VRRP.Failover == FailoverStable {
		s.VRRP.AdvertInterval = cmp.Or(s.VRRP.AdvertInterval, StableAdvertInterval)
	}
	s.VRRP.AdvertInterval = cmp.Or(s.VRRP.AdvertInterval, DefaultAdvertInterval)
	s.Mode = cmp.Or(s.Mode, ModeVRRP)
	if s.Mode == ModeBGP {
		s.BGP = s.BGP.withDefaults()
	}
	s.TrackDir = cmp.Or(s.TrackDir, DefaultTrackDir)
	s.IngressService = cmp.Or(s.IngressService, DefaultIngressService)
	s.Domain = strings.ToLower(strings.TrimSuffix(s.Domain, "."))
	s.Node = strings.ToLower(s.Node)
	h := map[string]string{}
	for k, v := range s.Health {
		h[k] = v
	}
	s.Health = h
	s.RouterIDs.Ingress = slices.Clone(s.RouterIDs.Ingress)
	s.Services = s.Services.clone()
	return s
}

// clone copies c, nil staying nil.
func (c *ServicesVRRP) clone() *ServicesVRRP {
	if c == nil {
		return nil
	}
	out := *c
	out.LocalIDs = slices.Clone(c.LocalIDs)
	return &out
}

// unmapAll keeps nil nil: a front end tests NodeIPs against nil for "not
// given" (find them on the host). An empty slice here made every
// bootstrap node skip that and rank 0, all at one VRRP priority.
func unmapAll(as []netip.Addr) []netip.Addr {
	if as == nil {
		return nil
	}
	out := make([]netip.Addr, len(as))
	for i, a := range as {
		out[i] = a.Unmap()
	}
	return out
}

// Spec returns the checked spec with its defaults (a copy).
func (m *Model) Spec() Spec {
	s := m.spec
	s.APIVIPs = slices.Clone(s.APIVIPs)
	s.IngressVIPs = slices.Clone(s.IngressVIPs)
	s.NodeIPs = slices.Clone(s.NodeIPs)
	s.StaticBackends = slices.Clone(s.StaticBackends)
	s.RouterIDs.Ingress = slices.Clone(s.RouterIDs.Ingress)
	s.BGP.Peers = slices.Clone(s.BGP.Peers)
	s.Services = s.Services.clone()
	s.Health = map[string]string{}
	for k, v := range m.spec.Health {
		s.Health[k] = v
	}
	return s
}

// Groups returns the VIP groups: "api" first, then the ingress groups in
// the order of the Spec's ingress VIPs.
func (m *Model) Groups() []Group {
	out := make([]Group, len(m.groups))
	for i, g := range m.groups {
		out[i] = g
		out[i].VIPs = slices.Clone(g.VIPs)
	}
	return out
}

// VIPs are the addresses of every group.
func (m *Model) VIPs() []netip.Addr {
	return slices.Concat(m.spec.APIVIPs, m.spec.IngressVIPs)
}

// Services is how the Services' addresses are held over VRRP (a copy),
// nil when they are not.
func (m *Model) Services() *ServicesVRRP { return m.spec.Services.clone() }

// RouterIDsTaken are the router IDs of "api" and the ingress groups: what
// the Services' groups step past (ServiceGroups' taken). The first ingress
// group's ID is in even when there is no ingress VIP, so adding one later
// renumbers no Services group.
func (m *Model) RouterIDsTaken() []uint8 { return slices.Clone(m.taken) }

// Mode is how the VIPs reach the network: ModeVRRP or ModeBGP.
func (m *Model) Mode() string { return m.spec.Mode }

// Name is the cluster name.
func (m *Model) Name() string { return m.spec.Name }

// NodeName is this node's Node name ("" until the front end knows it).
func (m *Model) NodeName() string { return m.spec.Node }

// Interface is the VRRP interface ("auto" until resolved).
func (m *Model) Interface() string { return m.spec.Interface }

// HealthURL is the URL that gates the groups of a check, or HealthNone.
func (m *Model) HealthURL(check string) string {
	if u := m.spec.Health[check]; u != "" {
		return u
	}
	switch check {
	case CheckAPI:
		return fmt.Sprintf("http://127.0.0.1:%d/haproxy_ready", m.spec.HealthPort)
	case CheckIngress:
		return DefaultIngressHealthURL
	}
	return HealthNone
}

// IngressService is the ingress service's namespace and name.
func (m *Model) IngressService() (namespace, name string) {
	namespace, name, _ = strings.Cut(m.spec.IngressService, "/")
	return namespace, name
}

// WithNode returns the model for one node once the host has told who it is
// (node name, the interface found for "auto", its addresses), checked by
// the same rules as a Spec.
func (m *Model) WithNode(node, iface string, ips []netip.Addr) (*Model, error) {
	s := m.Spec()
	s.Node, s.Interface, s.NodeIPs = node, iface, ips
	return New(s)
}
