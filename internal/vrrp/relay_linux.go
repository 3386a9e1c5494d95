package vrrp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/nftables"

	"github.com/infradns/infradns/internal/nftmap"
)

// Relay keeps the hand-over relay's nftables tables (see relay.go) while it
// runs (with the nft binary): the kernel fills their maps from the adverts
// that arrive, and Observe does too (over netlink) from the adverts a
// Listener hears, telling Relayed. Needs CAP_NET_ADMIN.
type Relay struct {
	Interface string
	VIPs      []netip.Addr
	// For is how long a resigned VIP is relayed; 0: DefaultRelay.
	For time.Duration
	// Live, above 0, also relays the packets of a VIP taken from a router
	// that was still advertising it (LiveHolder): the kernel keeps, from
	// each other router's advert, who advertises each VIP, for Live after
	// the last one (the LiveHolder window), so the relay is in place the
	// moment this node takes the VIP over. lbconfig's TakenOver, after the
	// address event, comes too late for a client whose next packet follows
	// the gratuitous ARP at once (a reset in 2 of 7 deaf-backup rounds).
	Live time.Duration
	// Own says whether an advert's source is this node.
	Own func(netip.Addr) bool
	// Relayed, when set, is told about each relay started (a log line, a
	// metric); Failed about each update or nft run that failed.
	Relayed func(vip, to netip.Addr)
	Failed  func(error)

	ready     atomic.Bool
	mu        sync.Mutex
	last      map[netip.Addr]time.Time    // per VIP, the last relay started
	live      map[netip.Addr]netip.Addr   // per VIP, the advertiser last put in the live map
	announced map[[2]netip.Addr]time.Time // per VIP and announcer, its last relay
}

// Run installs the tables, keeps them until ctx ends, then removes them.
// They go to the network namespace of the calling thread, as the maps
// Observe fills go to its caller's.
func (r *Relay) Run(ctx context.Context) error {
	// The kernel learns only the VIPs a resigning node keeps on lo, as this
	// one would (the nodes share their sysctls; read once: Observe reads
	// arp_ignore at each advert).
	var learn []netip.Addr
	for _, vip := range r.VIPs {
		if DrainCopy(netip.PrefixFrom(vip.Unmap(), vip.Unmap().BitLen()), r.VIPs, arpIgnore(r.Interface)) {
			learn = append(learn, vip)
		}
	}
	setup, err := RelaySetupScript(r.Interface, learn, r.duration(), r.Live)
	if err != nil {
		return err
	}
	ifi, err := net.InterfaceByName(r.Interface)
	if err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	if ifi.Flags&net.FlagLoopback != 0 {
		return fmt.Errorf("relay: %s is a loopback interface: no other node to hand connections back to", r.Interface)
	}
	if err := r.nft(ctx, setup); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	r.ready.Store(true)
	<-ctx.Done()
	r.ready.Store(false)
	tctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := r.nft(tctx, RelayTeardownScript()); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	return nil
}

// Observe relays the VIPs of ours that o gives up to its source: a
// Listener's Handle (it blocks for the netlink round trips).
func (r *Relay) Observe(o Observation) {
	if !r.ready.Load() {
		return
	}
	d := r.duration()
	now := time.Now()
	for _, vip := range ResignedVIPs(o, r.VIPs, r.Own) {
		// Only to a node that keeps the VIP on lo, as this one would (the
		// nodes share their sysctls): without the copy it would route the
		// packets back here.
		if !DrainCopy(netip.PrefixFrom(vip, vip.BitLen()), r.VIPs, arpIgnore(r.Interface)) {
			continue
		}
		r.mu.Lock()
		if r.last == nil {
			r.last = map[netip.Addr]time.Time{}
		}
		// keepalived sends a resignation once per instance; a burst of
		// them (or a flood from the link) makes one update per VIP.
		recent := now.Sub(r.last[vip]) < d/4
		if !recent {
			r.last[vip] = now
		}
		r.mu.Unlock()
		if recent {
			continue
		}
		if err := r.add(RelayMap, vip, o.Source.Unmap(), d); err != nil {
			r.fail(fmt.Errorf("relay %s to %s: %w", vip, o.Source.Unmap(), err))
			continue
		}
		if r.Relayed != nil {
			r.Relayed(vip, o.Source.Unmap())
		}
	}
}

// TakenOver relays vip to from for d: this node has just taken vip from
// from, which was still advertising it (LiveHolder). from keeps the VIP (it
// outranks us, and this node yields at its next advert) or gives it up when
// it hears us and keeps its copy on lo for a drain from then. d is at most
// DefaultRelay, as for a resignation: one read late makes a graceful
// hand-over look like this, and that copy began a few milliseconds before
// our takeover. It says whether the relay started.
func (r *Relay) TakenOver(vip, from netip.Addr, d time.Duration) bool {
	vip, from = vip.Unmap(), from.Unmap()
	if !r.ready.Load() || (r.Own != nil && r.Own(from)) {
		return false
	}
	if !DrainCopy(netip.PrefixFrom(vip, vip.BitLen()), r.VIPs, arpIgnore(r.Interface)) {
		return false
	}
	// Not in r.last: a resignation right after must still be relayed.
	if err := r.add(RelayMap, vip, from, d); err != nil {
		r.fail(fmt.Errorf("relay %s to %s after taking it over: %w", vip, from, err))
		return false
	}
	return true
}

// Announced relays vip to by, a peer that has just announced it (a
// gratuitous ARP or an unsolicited Neighbor Advertisement: its keepalived
// or lbconfig says it holds the VIP), for the Relay's duration after its
// last announcement. Clients that follow it open connections there, and
// when they come back here (our own announcement, its keepalived
// yielding) those connections' next packets would be reset. The holder
// paused and resumed does exactly that: its keepalived, still MASTER,
// refreshes its gratuitous ARP before it reads the adverts that make it
// yield, and keeps the VIP on lo for a drain from then; the lab's client
// opened a connection there, came back with the new holder's gratuitous
// ARP 150 ms later, 8 ms into the handshake, and was reset (one request in
// about eight pauses). Its adverts put it in the live map too, but only for
// the live window after the last one, which had passed. Only an
// announcement counts: a paused node's kernel still answers ARP requests,
// and its connections are better reset than relayed into the pause. It
// says whether a relay started (none for by within the duration before),
// for the log; an announcement within a quarter of the duration of the
// last renewal is not written again.
func (r *Relay) Announced(vip, by netip.Addr) bool {
	vip, by = vip.Unmap(), by.Unmap()
	if !r.ready.Load() || !by.IsValid() || (r.Own != nil && r.Own(by)) || !contains(r.VIPs, vip) {
		return false
	}
	d, now := r.duration(), time.Now()
	key := [2]netip.Addr{vip, by}
	r.mu.Lock()
	last := r.announced[key]
	renew := now.Sub(last) >= d/4
	if renew {
		if r.announced == nil {
			r.announced = map[[2]netip.Addr]time.Time{}
		}
		for k, at := range r.announced {
			if now.Sub(at) > d {
				delete(r.announced, k)
			}
		}
		r.announced[key] = now
	}
	r.mu.Unlock()
	if !renew {
		return false
	}
	if !DrainCopy(netip.PrefixFrom(vip, vip.BitLen()), r.VIPs, arpIgnore(r.Interface)) {
		return false
	}
	if err := r.add(RelayMap, vip, by, d); err != nil {
		r.mu.Lock()
		delete(r.announced, key) // tried again at the next announcement
		r.mu.Unlock()
		r.fail(fmt.Errorf("relay %s to %s, which announced it: %w", vip, by, err))
		return false
	}
	return now.Sub(last) > d
}

// Advertised keeps the live map's target right: a peer's advert (priority
// above 0) of VIPs of ours, a Link's Advertised. The kernel's update of an
// entry only renews its timeout and keeps the router it first learnt, so
// where a second router advertises a VIP within Live of the first (a
// graceful hand-over, a takeover) the entry would keep naming the first
// for as long as the second advertises. Only a change of advertiser costs
// a netlink round trip.
func (r *Relay) Advertised(o Observation) {
	if r.Live <= 0 || !r.ready.Load() || o.Advert.Priority == 0 || !o.Source.IsValid() || (r.Own != nil && r.Own(o.Source)) {
		return
	}
	from := o.Source.Unmap()
	for _, a := range o.Advert.Addresses {
		vip := a.Unmap()
		if vip.Is6() != from.Is6() || !contains(r.VIPs, vip) {
			continue
		}
		r.mu.Lock()
		same := r.live[vip] == from
		r.mu.Unlock()
		// Every advert of the holder comes here (16 a second per VIP at
		// 60 ms): the sysctl read only when the advertiser changed.
		if same || !DrainCopy(netip.PrefixFrom(vip, vip.BitLen()), r.VIPs, arpIgnore(r.Interface)) {
			continue
		}
		r.mu.Lock()
		if r.live == nil {
			r.live = map[netip.Addr]netip.Addr{}
		}
		r.live[vip] = from
		r.mu.Unlock()
		if err := r.add(RelayLiveMap, vip, from, r.Live); err != nil {
			r.mu.Lock()
			delete(r.live, vip) // tried again at the next advert
			r.mu.Unlock()
			r.fail(fmt.Errorf("live relay target of %s: %s: %w", vip, from, err))
		}
	}
}

// add puts vip → to in the map m for d, over netlink: 0.06–0.4 ms in the
// lab (nft takes 12–28 ms per run), where the next holder of the highest
// priority takes over 1.4 ms after the resignation (priority 250, 60-ms
// adverts).
func (r *Relay) add(m string, vip, to netip.Addr, d time.Duration) error {
	if vip.Is6() != to.Is6() || vip == to {
		return fmt.Errorf("not a relay target")
	}
	fam, typ := nftables.TableFamilyIPv4, nftables.TypeIPAddr
	if vip.Is6() {
		fam, typ = nftables.TableFamilyIPv6, nftables.TypeIP6Addr
	}
	c, err := nftables.New()
	if err != nil {
		return err
	}
	set := &nftables.Set{Table: &nftables.Table{Name: RelayTable, Family: fam}, Name: m,
		IsMap: true, HasTimeout: true, KeyType: typ, DataType: typ}
	return nftmap.Put(c, set, []nftables.SetElement{{Key: vip.AsSlice(), Val: to.AsSlice(), Timeout: d}})
}

// duration is how long a resigned VIP is relayed.
func (r *Relay) duration() time.Duration {
	if r.For <= 0 {
		return DefaultRelay
	}
	return r.For
}

func (r *Relay) fail(err error) {
	if r.Failed != nil {
		r.Failed(err)
	}
}

// nft runs an nft script.
func (r *Relay) nft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(out) > 0 {
			return fmt.Errorf("nft: %s", strings.TrimSpace(string(out)))
		}
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}
