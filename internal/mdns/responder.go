package mdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Collision avoidance policies (OpenShift mdns-publisher's collision_avoidance).
const (
	// CollisionInaction keeps the configured names when another host holds
	// them; the conflict is logged and counted.
	CollisionInaction = "inaction"
	// CollisionHostname appends "-<short hostname>" to instance names so they
	// are unique per node, and renames (suffix -2, -3, ...) on a conflict.
	CollisionHostname = "hostname"
)

// ResponderConfig configures a publisher.
type ResponderConfig struct {
	Interface string     // announce on this interface
	Bind      netip.Addr // or on the interface holding this address
	Host      string     // short host name, the label before .local
	Cluster   string
	Services  []Service
	Key       []byte // sign announcements when set
	HostTTL   uint32 // 0: HostTTL
	LinkLocal bool   // announce IPv6 link-local addresses too
	// Exclude are addresses of the interface never announced: the cluster's
	// VIPs, which keepalived adds to the same interface on whichever node
	// holds them and which are no node's own.
	Exclude   []netip.Addr
	Collision string // CollisionInaction (default) or CollisionHostname
	// Poll is how often the interface's addresses are read; address changes
	// are announced within one period. 0: 250 ms.
	Poll   time.Duration
	Logger *slog.Logger
	// Events, when set, is called for each thing worth counting: "probe",
	// "announcement", "goodbye", "response", "conflict", "address_change".
	Events func(event string)
}

// Responder is the publisher: it claims a host name and its services on one
// interface and defends them until its context ends.
type Responder struct {
	cfg    ResponderConfig
	log    *slog.Logger
	mu     sync.Mutex
	phase  Phase
	zone   *Zone
	lastMC map[string]time.Time // name/type → last multicast (RFC 6762 6.2)
	rename int
	// defended is when we last re-announced, or will, because of a goodbye
	// for our records; see defend.
	defended time.Time
}

// addrs are the interface's addresses to announce.
func (r *Responder) addrs(ifi *net.Interface) ([]netip.Addr, error) {
	as, err := InterfaceAddrs(ifi, r.cfg.LinkLocal)
	if err != nil {
		return nil, err
	}
	return Without(as, r.cfg.Exclude), nil
}

// NewResponder checks cfg and returns a Responder.
func NewResponder(cfg ResponderConfig) (*Responder, error) {
	if cfg.Interface == "" && !cfg.Bind.IsValid() {
		return nil, errors.New("an interface or a bind address is required")
	}
	if !ValidHostLabel(lower(cfg.Host)) {
		return nil, fmt.Errorf("host name %q is not a valid single label", cfg.Host)
	}
	cfg.Host = lower(cfg.Host)
	if cfg.Collision == "" {
		cfg.Collision = CollisionInaction
	}
	if cfg.Collision != CollisionInaction && cfg.Collision != CollisionHostname {
		return nil, fmt.Errorf("collision avoidance %q: want %s or %s", cfg.Collision, CollisionInaction, CollisionHostname)
	}
	cfg.Services = slices.Clone(cfg.Services)
	for i, s := range cfg.Services {
		if cfg.Collision == CollisionHostname {
			cfg.Services[i].Instance = s.Instance + "-" + cfg.Host
		}
	}
	if len(cfg.Services) == 0 {
		cfg.Services = []Service{DefaultService(cfg.Cluster, cfg.Host)} // already per host
	}
	for i := range cfg.Services {
		if err := cfg.Services[i].Validate(); err != nil {
			return nil, err
		}
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Events == nil {
		cfg.Events = func(string) {}
	}
	return &Responder{cfg: cfg, log: cfg.Logger, lastMC: map[string]time.Time{}}, nil
}

// Phase returns the responder's phase (for readiness and tests).
func (r *Responder) Phase() Phase {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.phase
}

func (r *Responder) setPhase(p Phase) {
	r.mu.Lock()
	r.phase = p
	r.mu.Unlock()
}

// setZone replaces the zone. Only Run's goroutine writes it and reads it
// without the lock; delayed replies read it from timers, under the lock.
func (r *Responder) setZone(z *Zone) {
	r.mu.Lock()
	r.zone = z
	r.mu.Unlock()
}

func (r *Responder) currentZone() *Zone {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.zone
}

func (r *Responder) buildZone(addrs []netip.Addr) *Zone {
	host := r.cfg.Host
	services := slices.Clone(r.cfg.Services)
	if r.rename > 0 {
		suffix := "-" + strconv.Itoa(r.rename+1)
		host += suffix
		for i := range services {
			services[i].Instance += suffix
			if lower(dns.Fqdn(services[i].Host)) == r.cfg.Host+"."+DefaultDomain {
				services[i].Host = host + "." + DefaultDomain
			}
		}
	}
	z := NewZone(host+"."+DefaultDomain, r.cfg.Cluster, services, addrs, r.cfg.Key)
	z.HostTTL = r.cfg.HostTTL
	return z
}

// Run publishes until ctx ends, then says goodbye and closes its sockets.
func (r *Responder) Run(ctx context.Context) error {
	ifi, addrs, err := r.waitInterface(ctx)
	if err != nil || ifi == nil {
		return err
	}
	conn, err := Listen(ctx, ifi)
	if err != nil {
		return err
	}
	defer conn.Close()
	in := make(chan Packet, 64)
	stop, readDone := make(chan struct{}), make(chan struct{})
	go func() { conn.Read(in, stop); close(readDone) }()
	defer func() { close(stop); conn.Close(); <-readDone }()

	r.setZone(r.buildZone(addrs))
	now := time.Now()
	// RFC 6762 8.1 asks for 0–250 ms; we wait at most 100 ms because a
	// node's name must be resolvable within a second of its start, and the
	// tie-break still settles simultaneous probes.
	ann := NewAnnouncer(now, rand.N(100*time.Millisecond))
	v4, v6 := conn.Families()
	r.log.Info("publishing", "interface", ifi.Name, "host", r.zone.Host, "addresses", addrs, "ipv4", v4, "ipv6", v6)
	poll := time.NewTicker(r.cfg.Poll)
	defer poll.Stop()
	timer := time.NewTimer(time.Until(ann.Next()))
	defer timer.Stop()
	var gone []netip.Addr // addresses to say goodbye to after the next announcement

	for {
		select {
		case <-ctx.Done():
			if ann.Phase() != Probing || r.Phase() != Probing {
				r.send(conn, r.zone.Announcement(NewStamp(time.Now()), true), nil)
				r.cfg.Events("goodbye")
				r.log.Info("goodbye sent", "host", r.zone.Host)
			}
			return nil
		case p := <-in:
			r.handle(conn, ann, p)
		case <-poll.C:
			as, err := r.addrs(ifi)
			if err != nil || slices.Equal(as, r.zone.Addrs) || len(as) == 0 {
				continue
			}
			r.log.Info("addresses changed", "old", r.zone.Addrs, "new", as)
			r.cfg.Events("address_change")
			// Signed announcements replace the whole address set at once; an
			// unsigned cache needs the goodbye, sent after the new addresses.
			if r.cfg.Key == nil {
				gone = slices.DeleteFunc(slices.Clone(r.zone.Addrs), func(a netip.Addr) bool { return slices.Contains(as, a) })
			}
			r.setZone(r.buildZone(as))
			ann.Reannounce(time.Now())
		case <-timer.C:
		}
		now := time.Now()
		switch ann.Step(now) {
		case SendProbe:
			r.send(conn, r.zone.Probe(), nil)
			r.cfg.Events("probe")
		case SendAnnouncement:
			r.setPhase(Announcing)
			r.send(conn, r.zone.Announcement(NewStamp(now), false), nil)
			r.markMulticast(r.zone.Announcement(Stamp{}, false), now)
			r.cfg.Events("announcement")
			if len(gone) > 0 {
				r.send(conn, r.zone.AddrGoodbye(gone), nil)
				gone = nil
			}
		}
		if ann.Phase() == Announced {
			r.setPhase(Announced)
		}
		if next := ann.Next(); !next.IsZero() {
			resetTimer(timer, time.Until(next))
		}
	}
}

func resetTimer(t *time.Timer, d time.Duration) {
	t.Stop()
	t.Reset(max(d, 0))
}

// waitInterface waits for the interface to exist and have an address: a
// publisher may start before the network is configured.
func (r *Responder) waitInterface(ctx context.Context) (*net.Interface, []netip.Addr, error) {
	logged := false
	for {
		ifi, err := FindInterface(r.cfg.Interface, r.cfg.Bind)
		var addrs []netip.Addr
		if err == nil {
			addrs, err = r.addrs(ifi)
			if err == nil && len(addrs) == 0 {
				err = fmt.Errorf("interface %s has no usable address", ifi.Name)
			}
		}
		if err == nil {
			return ifi, addrs, nil
		}
		if !logged {
			r.log.Warn("waiting for the interface", "error", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, nil, nil
		case <-time.After(r.cfg.Poll):
		}
	}
}

// defendGap spaces our answers to forged goodbyes: a forger sends one per
// family, and the second may arrive after our first re-announcement, so a
// later goodbye gets its own, at most one per gap, well inside the one second
// a cache keeps a record after its goodbye.
const defendGap = 100 * time.Millisecond

func (r *Responder) defend(ann *Announcer, from netip.AddrPort, now time.Time) {
	if r.defended.After(now) {
		return // a re-announcement is already scheduled after this goodbye
	}
	at := now
	if next := r.defended.Add(defendGap); next.After(at) {
		at = next
	}
	r.defended = at
	r.cfg.Events("goodbye_defended")
	r.log.Warn("another host said goodbye for our records: re-announcing", "from", from, "host", r.zone.Host, "at", at.Sub(now))
	ann.Reannounce(at)
}

func (r *Responder) handle(conn *Conn, ann *Announcer, p Packet) {
	m, err := ParsePacket(p.Data)
	if err != nil {
		return
	}
	now := time.Now()
	if m.Response {
		if p.Src.Port() != Port {
			return
		}
		if ann.Phase() != Probing && r.zone.ByeForUs(m) {
			r.defend(ann, p.Src, now)
			return
		}
		if !r.zone.Conflicts(m) {
			return
		}
		r.cfg.Events("conflict")
		if ann.Phase() == Probing && r.cfg.Collision == CollisionHostname {
			r.rename++
			r.setZone(r.buildZone(r.zone.Addrs))
			r.log.Warn("name conflict while probing: renamed", "host", r.zone.Host)
			ann.Reprobe(now, 0)
			return
		}
		r.log.Warn("another host claims our names", "from", p.Src, "host", r.zone.Host, "policy", r.cfg.Collision)
		return
	}
	if ann.Phase() == Probing {
		if r.zone.ProbeConflict(m) {
			// We lost the simultaneous-probe tie-break (RFC 6762 8.2).
			ann.Reprobe(now, ProbeDeferral)
		}
		return // names not ours yet: answer nothing
	}
	reply := r.zone.Respond(m, p.Src, NewStamp(now))
	if reply == nil {
		return
	}
	r.cfg.Events("response")
	if reply.Unicast {
		r.send(conn, reply.Msg, &p.Src)
		return
	}
	probe := len(m.Ns) > 0
	reply.Msg.Answer = r.rateLimit(reply.Msg.Answer, now, probe)
	if len(reply.Msg.Answer) == 0 {
		return
	}
	if reply.Shared {
		zone := r.zone
		time.AfterFunc(20*time.Millisecond+rand.N(100*time.Millisecond), func() {
			// A reply built before an address change must not follow the
			// change's announcement: its old addresses would count as fresh
			// and survive the cache flush (RFC 6762 10.2 keeps what arrived
			// within the last second). The announcement answers the query.
			if r.currentZone() != zone {
				return
			}
			// Signed when sent, not when the query came: an announcement
			// sent during the delay carries a later time, and a resolver
			// takes an older one arriving after it for a replay.
			if late := zone.Respond(m, p.Src, NewStamp(time.Now())); late != nil {
				late.Msg.Answer = sameRecords(late.Msg.Answer, reply.Msg.Answer)
				r.send(conn, late.Msg, nil)
			}
		})
		return
	}
	r.send(conn, reply.Msg, nil)
}

// rateLimit drops answers multicast less than a second ago (a quarter
// second when defending against a probe), RFC 6762 6.2.
func (r *Responder) rateLimit(answer []dns.RR, now time.Time, probe bool) []dns.RR {
	gap := time.Second
	if probe {
		gap = ProbeInterval
	}
	out := answer[:0:0]
	for _, rr := range answer {
		if t, ok := r.lastMC[rrKey(rr)]; ok && now.Sub(t) < gap {
			continue
		}
		out = append(out, rr)
	}
	for _, rr := range out {
		r.lastMC[rrKey(rr)] = now
	}
	return out
}

func (r *Responder) markMulticast(m *dns.Msg, now time.Time) {
	for _, rr := range m.Answer {
		r.lastMC[rrKey(rr)] = now
	}
}

// sameRecords keeps the records of rrs whose name and type are among
// those of kept (what the rate limit let through).
func sameRecords(rrs, kept []dns.RR) []dns.RR {
	out := rrs[:0:0]
	for _, rr := range rrs {
		if slices.ContainsFunc(kept, func(k dns.RR) bool { return rrKey(k) == rrKey(rr) }) {
			out = append(out, rr)
		}
	}
	return out
}

func rrKey(rr dns.RR) string {
	h := rr.Header()
	return lower(h.Name) + "/" + strconv.Itoa(int(h.Rrtype))
}

func (r *Responder) send(conn *Conn, m *dns.Msg, to *netip.AddrPort) {
	b, err := m.Pack()
	if err != nil {
		r.log.Error("pack mdns message", "error", err)
		return
	}
	if to != nil {
		err = conn.Unicast(b, *to)
	} else {
		err = conn.Multicast(b)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		r.log.Debug("send", "error", err)
	}
}
