package mdns

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// Service is one DNS-SD service instance a node publishes.
type Service struct {
	Instance string // the instance label, free text: "ocp4 Workstation-node1"
	Type     string // "_workstation._tcp"
	Domain   string // "local."
	Host     string // target host name, fully qualified: "node1.local."
	Port     uint16
	TTL      uint32 // of PTR, SRV and TXT; 0 means ServiceTTL
}

// TypeName is the service type's name: "_workstation._tcp.local.".
func (s Service) TypeName() string { return lower(dns.Fqdn(s.Type + "." + dns.Fqdn(s.Domain))) }

// InstanceName is the instance's name in presentation form.
func (s Service) InstanceName() string { return escapeLabel(s.Instance) + "." + s.TypeName() }

func (s Service) ttl() uint32 {
	if s.TTL == 0 {
		return ServiceTTL
	}
	return s.TTL
}

// Validate checks what a publisher is about to claim.
func (s Service) Validate() error {
	if s.Instance == "" || len(s.Instance) > 63 {
		return fmt.Errorf("service instance name %q must be 1 to 63 bytes", s.Instance)
	}
	if _, ok := dns.IsDomainName(s.TypeName()); !ok || !strings.HasPrefix(s.Type, "_") {
		return fmt.Errorf("invalid service type %q", s.Type)
	}
	if _, ok := dns.IsDomainName(s.Host); !ok || s.Host == "" {
		return fmt.Errorf("invalid host name %q", s.Host)
	}
	return nil
}

// DefaultService is the service OpenShift's publisher announced for a node.
func DefaultService(cluster, shortHost string) Service {
	inst := "Workstation-" + shortHost
	if cluster != "" {
		inst = cluster + " " + inst
	}
	return Service{Instance: inst, Type: DefaultServiceType, Domain: DefaultDomain, Host: shortHost + "." + DefaultDomain, Port: DefaultPort, TTL: ServiceTTL}
}

// Zone is everything one publisher claims: a host name with its addresses and
// the services that point at it. It is a value: the Responder builds a new one
// whenever the interface's addresses change.
type Zone struct {
	Host     string // fully qualified, "node1.local."
	Cluster  string
	Services []Service
	HostTTL  uint32 // of A/AAAA; 0 means HostTTL
	Addrs    []netip.Addr
	Key      []byte // nil: unsigned announcements
}

// NewZone returns a Zone with its addresses sorted and deduplicated.
func NewZone(host, cluster string, services []Service, addrs []netip.Addr, key []byte) *Zone {
	a := slices.Clone(addrs)
	slices.SortFunc(a, netip.Addr.Compare)
	return &Zone{Host: lower(dns.Fqdn(host)), Cluster: cluster, Services: services, Addrs: slices.Compact(a), Key: key}
}

func (z *Zone) hostTTL() uint32 {
	if z.HostTTL == 0 {
		return HostTTL
	}
	return z.HostTTL
}

// Stamp is the per-packet part of a signature: every signed packet carries a
// fresh timestamp and nonce so that a receiver can refuse replays.
type Stamp struct {
	TS    int64
	Nonce string
}

// NewStamp returns a stamp for now with a random nonce.
func NewStamp(now time.Time) Stamp {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand documentation)
	return Stamp{TS: now.UnixMilli(), Nonce: hex.EncodeToString(b[:])}
}

// rrOpts says how records are written for one message.
type rrOpts struct {
	goodbye bool  // TTL 0
	flush   bool  // set the cache-flush bit on unique records
	maxTTL  int64 // legacy unicast caps TTLs (RFC 6762 6.7); 0: no cap
	stamp   Stamp
}

func (o rrOpts) hdr(name string, t uint16, ttl uint32, unique bool) dns.RR_Header {
	if o.goodbye {
		ttl = 0
	}
	if o.maxTTL > 0 && int64(ttl) > o.maxTTL {
		ttl = uint32(o.maxTTL)
	}
	class := uint16(dns.ClassINET)
	if unique && o.flush {
		class |= classFlush
	}
	return dns.RR_Header{Name: name, Rrtype: t, Class: class, Ttl: ttl}
}

// AddrRRs returns the host's address records of qtype (A, AAAA, or ANY for both).
func (z *Zone) addrRRs(qtype uint16, o rrOpts) []dns.RR {
	var rrs []dns.RR
	for _, a := range z.Addrs {
		switch {
		case a.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
			rrs = append(rrs, &dns.A{Hdr: o.hdr(z.Host, dns.TypeA, z.hostTTL(), true), A: a.AsSlice()})
		case a.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
			rrs = append(rrs, &dns.AAAA{Hdr: o.hdr(z.Host, dns.TypeAAAA, z.hostTTL(), true), AAAA: a.AsSlice()})
		}
	}
	return rrs
}

// txt returns the service's TXT record: the cluster, and when a key is set
// the signature fields.
func (z *Zone) txt(s Service, o rrOpts) *dns.TXT {
	var fields []string
	if z.Cluster != "" {
		fields = append(fields, txtCluster+"="+z.Cluster)
	}
	if z.Key != nil {
		sig := Sign(z.Key, Signed{Cluster: z.Cluster, Host: lower(s.Host), Addrs: z.hostAddrs(s.Host), TS: o.stamp.TS, Nonce: o.stamp.Nonce, Goodbye: o.goodbye})
		fields = append(fields, fmt.Sprintf("%s=%d", txtTime, o.stamp.TS), txtNonce+"="+o.stamp.Nonce, txtSig+"="+sig)
	}
	if len(fields) == 0 {
		fields = []string{""} // RFC 6763 6.1: a TXT record holds at least one string
	}
	return &dns.TXT{Hdr: o.hdr(s.InstanceName(), dns.TypeTXT, s.ttl(), true), Txt: fields}
}

// hostAddrs is what a service's signature covers: our addresses when the
// service points at our host, none otherwise.
func (z *Zone) hostAddrs(host string) []netip.Addr {
	if lower(dns.Fqdn(host)) == z.Host {
		return z.Addrs
	}
	return nil
}

func (z *Zone) srv(s Service, o rrOpts) *dns.SRV {
	return &dns.SRV{Hdr: o.hdr(s.InstanceName(), dns.TypeSRV, s.ttl(), true), Port: s.Port, Target: lower(dns.Fqdn(s.Host))}
}

func (z *Zone) ptr(s Service, o rrOpts) *dns.PTR {
	return &dns.PTR{Hdr: o.hdr(s.TypeName(), dns.TypePTR, s.ttl(), false), Ptr: s.InstanceName()}
}

// servicesPTR is the DNS-SD service type enumeration (RFC 6763 9).
func (z *Zone) enumPTR(s Service, o rrOpts) *dns.PTR {
	return &dns.PTR{Hdr: o.hdr("_services._dns-sd._udp."+lower(dns.Fqdn(s.Domain)), dns.TypePTR, s.ttl(), false), Ptr: s.TypeName()}
}

// Announcement is the unsolicited response that claims (or, with goodbye,
// releases) every record of the zone: RFC 6762 8.3 and 10.1.
func (z *Zone) Announcement(stamp Stamp, goodbye bool) *dns.Msg {
	o := rrOpts{goodbye: goodbye, flush: true, stamp: stamp}
	m := response()
	for _, s := range z.Services {
		m.Answer = append(m.Answer, z.ptr(s, o), z.srv(s, o), z.txt(s, o))
	}
	m.Answer = append(m.Answer, z.addrRRs(dns.TypeANY, o)...)
	return m
}

// AddrGoodbye says goodbye (TTL 0) to addresses the host no longer holds
// (RFC 6762 10.1). The cache-flush bit of the next announcement would drop
// them only a second after it arrives, and not at all where the old record
// was refreshed within the last second.
func (z *Zone) AddrGoodbye(gone []netip.Addr) *dns.Msg {
	old := *z
	old.Addrs = gone
	m := response()
	m.Answer = old.addrRRs(dns.TypeANY, rrOpts{goodbye: true})
	return m
}

// Probe is the query that asks whether anyone else holds our unique names
// (RFC 6762 8.1): one ANY question per name with the QU bit, and the records
// we intend to claim in the authority section for simultaneous-probe tie-breaking.
func (z *Zone) Probe() *dns.Msg {
	o := rrOpts{}
	m := new(dns.Msg)
	m.Question = append(m.Question, dns.Question{Name: z.Host, Qtype: dns.TypeANY, Qclass: dns.ClassINET | classUnicast})
	m.Ns = append(m.Ns, z.addrRRs(dns.TypeANY, o)...)
	for _, s := range z.Services {
		m.Question = append(m.Question, dns.Question{Name: s.InstanceName(), Qtype: dns.TypeANY, Qclass: dns.ClassINET | classUnicast})
		m.Ns = append(m.Ns, z.srv(s, o))
	}
	return m
}

func response() *dns.Msg {
	m := new(dns.Msg)
	m.Response = true
	m.Authoritative = true
	return m
}
