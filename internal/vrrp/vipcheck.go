package vrrp

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// VIPChecker removes the VIPs a dead keepalived left on the interface. After
// kill -9 (or an OOM kill of its container) keepalived cannot remove its
// addresses, and the lab showed the VIP on two nodes at once: the dead holder
// still answers ARP for it. While the keepalived process is alive the
// checker does nothing: keepalived owns its addresses.
type VIPChecker struct {
	Interface string
	VIPs      []netip.Addr
	// Alive reports whether keepalived runs (see PidAlive).
	Alive func() bool
	// Interval between checks; a VIP is removed after Confirm checks in a
	// row found keepalived dead, so a restart in progress is left alone.
	Interval time.Duration
	Confirm  int
	// HeldElsewhere, when set, says whether another router has advertised
	// vip (priority above 0) since the given time. A stale VIP then stays
	// until another node holds it, or until Grace has passed: while it
	// stays, the dead node refuses connections to it at once (RST) and a
	// client tries again, where a SYN sent to the dead node's MAC after the
	// removal would vanish; once another node holds it, it goes, since the
	// dead node answering ARP beside the new holder cost a 1.3 s outage in 1
	// of 20 lab crashes when it stayed 3 s. Nil removes after Confirm checks.
	HeldElsewhere func(vip netip.Addr, since time.Time) bool
	// Grace bounds how long a stale VIP waits for another holder: 3 s if 0.
	Grace time.Duration
	// Wake, when set, makes the checker look again at once (between
	// checks) once keepalived is known dead: Heard.Wake, so the stale VIP
	// goes within a millisecond of the new holder's first advert, while the
	// old node would otherwise keep answering ARP for it.
	Wake <-chan struct{}
	// Removed, when set, is told about each removal (a log line, a metric).
	Removed func(netip.Prefix, error)
}

// Run checks until ctx is cancelled.
func (v *VIPChecker) Run(ctx context.Context) error {
	interval := v.Interval
	if interval <= 0 {
		interval = time.Second
	}
	confirm := max(v.Confirm, 1)
	grace := v.Grace
	if grace <= 0 {
		grace = 3 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	dead := 0
	var deadSince time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-v.Wake:
			if dead >= confirm {
				v.remove(time.Now(), deadSince, grace)
			}
			continue
		case <-t.C:
		}
		now := time.Now()
		if v.Alive() {
			dead = 0
			continue
		}
		if dead == 0 {
			// The last check that found it alive was an interval ago.
			deadSince = now.Add(-interval)
		}
		if dead++; dead < confirm {
			continue
		}
		v.remove(now, deadSince, grace)
	}
}

// remove deletes the stale VIPs that may go: each once another node holds
// it, or all once grace has passed since keepalived died.
func (v *VIPChecker) remove(now, deadSince time.Time, grace time.Duration) {
	present, err := InterfacePrefixes(v.Interface)
	if err != nil {
		return // the interface may be gone; nothing to clean
	}
	for _, p := range Stale(present, v.VIPs) {
		if v.HeldElsewhere != nil && now.Sub(deadSince) < grace && !v.HeldElsewhere(p.Addr(), deadSince) {
			continue
		}
		err := DeleteAddr(v.Interface, p)
		if v.Removed != nil {
			v.Removed(p, err)
		}
	}
}

// Heard remembers, for each VIP, when which router last advertised it with
// a priority above 0 from a source that is not one of Own: the VIPChecker's
// HeldElsewhere and the split-brain check's evidence. It is fed the
// peers' adverts only (Link), and bounded whatever it is fed: at most
// maxHeardVIPs addresses and maxHeardSources senders each. Safe for
// concurrent use.
type Heard struct {
	// Own says whether a source address is this node's (its own adverts,
	// looped back, are not another holder).
	Own  func(netip.Addr) bool
	mu   sync.Mutex
	from map[netip.Addr]map[sender]time.Time
	// resigned is when another router last resigned a VIP of from (a
	// priority-0 advert): only VIPs already heard, so it is bounded too.
	resigned map[netip.Addr]time.Time
	wake     chan struct{}
}

// sender is who sent an advert: its address and the frame's MAC.
type sender struct {
	addr netip.Addr
	mac  MAC
}

const (
	maxHeardVIPs    = 256
	maxHeardSources = 64
	// heardExpiry: older entries may make room for new ones.
	heardExpiry = time.Minute
)

// Wake is signalled (without blocking, coalesced) after each advert from
// another router: the VIPChecker's Wake.
func (h *Heard) Wake() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.wake == nil {
		h.wake = make(chan struct{}, 1)
	}
	return h.wake
}

// Observe records an advert seen at now.
func (h *Heard) Observe(o Observation, now time.Time) {
	if h.Own != nil && h.Own(o.Source) {
		return // ourselves
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if o.Advert.Priority == 0 {
		// A holder resigning: not a router advertising the VIP.
		for _, a := range o.Advert.Addresses {
			if a = a.Unmap(); h.from[a] != nil {
				if h.resigned == nil {
					h.resigned = map[netip.Addr]time.Time{}
				}
				h.resigned[a] = now
			}
		}
		return
	}
	if h.from == nil {
		h.from = map[netip.Addr]map[sender]time.Time{}
	}
	who := sender{o.Source.Unmap(), o.MAC}
	for _, a := range o.Advert.Addresses {
		a = a.Unmap()
		m := h.from[a]
		if m == nil {
			if len(h.from) >= maxHeardVIPs && !h.expire(now) {
				continue
			}
			m = map[sender]time.Time{}
			h.from[a] = m
		}
		if _, ok := m[who]; ok || len(m) < maxHeardSources {
			m[who] = now
		}
	}
	if h.wake != nil {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
}

// expire forgets the addresses nobody advertised for heardExpiry and says
// whether that made room. Called with h.mu held.
func (h *Heard) expire(now time.Time) bool {
	for a, m := range h.from {
		for who, at := range m {
			if now.Sub(at) > heardExpiry {
				delete(m, who)
			}
		}
		if len(m) == 0 {
			delete(h.from, a)
			delete(h.resigned, a)
		}
	}
	return len(h.from) < maxHeardVIPs
}

// Since says whether another router advertised vip after t.
func (h *Heard) Since(vip netip.Addr, t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, at := range h.from[vip.Unmap()] {
		if at.After(t) {
			return true
		}
	}
	return false
}

// From lists the sources that advertised vip after t.
func (h *Heard) From(vip netip.Addr, t time.Time) []netip.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []netip.Addr
	for who, at := range h.from[vip.Unmap()] {
		if at.After(t) && !slices.Contains(out, who.addr) {
			out = append(out, who.addr)
		}
	}
	return out
}

// Latest is the router that advertised vip last, and when; false when no
// other router did, or when a router resigned vip since (a graceful
// hand-over, which the relay follows by itself).
func (h *Heard) Latest(vip netip.Addr) (netip.Addr, time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	vip = vip.Unmap()
	var from netip.Addr
	var last time.Time
	for who, at := range h.from[vip] {
		if at.After(last) {
			from, last = who.addr, at
		}
	}
	if last.IsZero() || !h.resigned[vip].Before(last) {
		return netip.Addr{}, time.Time{}, false
	}
	return from, last, true
}

// MACs lists the link-layer sources of the adverts for vip after t.
func (h *Heard) MACs(vip netip.Addr, t time.Time) []MAC {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []MAC
	for who, at := range h.from[vip.Unmap()] {
		if at.After(t) && who.mac != (MAC{}) && !slices.Contains(out, who.mac) {
			out = append(out, who.mac)
		}
	}
	return out
}

// Stale are the addresses on the interface that are VIPs as keepalived adds
// them: host prefixes (/32, /128). A VIP inside a node's own subnet prefix
// (a misconfiguration, or the node's real address) is never touched.
func Stale(present []netip.Prefix, vips []netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range present {
		if p.IsSingleIP() && contains(vips, p.Addr()) {
			out = append(out, p)
		}
	}
	return out
}

func contains(as []netip.Addr, a netip.Addr) bool {
	for _, x := range as {
		if x.Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// InterfacePrefixes lists the addresses of an interface with their prefix
// lengths.
func InterfacePrefixes(iface string) ([]netip.Prefix, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	return Prefixes(as), nil
}

// Prefixes converts what net.Interface.Addrs returns.
func Prefixes(as []net.Addr) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ones, _ := n.Mask.Size()
		out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return out
}

// PidAlive returns an Alive func: true while the process named in pidfile
// runs and is called comm. A reused pid of another program is not alive,
// and neither is a zombie: a killed keepalived whose parent has not reaped
// it still answers kill(pid, 0) and keeps its comm, and the lab saw its VIP
// stay on the dead node for over 15 s when the parent never reaped.
func PidAlive(pidfile, comm string) func() bool {
	return func() bool {
		b, err := os.ReadFile(pidfile)
		if err != nil {
			return false
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			return false
		}
		if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
			return false
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			// Another pid namespace hides /proc: trust the signal check.
			return true
		}
		name, state, ok := ProcStat(stat)
		return ok && name == comm && state != 'Z' && state != 'X'
	}
}

// ProcStat reads the command name and the state letter from the contents of
// /proc/PID/stat ("PID (COMM) S ..."). The name may hold spaces and
// parentheses, so it ends at the last ')'.
func ProcStat(b []byte) (comm string, state byte, ok bool) {
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+2 >= len(s) || s[end+1] != ' ' {
		return "", 0, false
	}
	return s[open+1 : end], s[end+2], true
}

// Held returns which of vips are on the interface now (with any prefix).
func Held(iface string, vips []netip.Addr) ([]netip.Addr, error) {
	present, err := InterfacePrefixes(iface)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, v := range vips {
		for _, p := range present {
			if p.Addr() == v.Unmap() {
				out = append(out, v.Unmap())
				break
			}
		}
	}
	return out, nil
}
