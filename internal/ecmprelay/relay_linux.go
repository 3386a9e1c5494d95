package ecmprelay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/infradns/infradns/internal/nftmap"
)

// Relay keeps the relay of one node (see the package comment): the VXLAN
// device, the neighbours that name the peers, the nftables tables (with
// the nft binary) and the control socket, in the network namespace of the
// thread that calls Update first. Needs CAP_NET_ADMIN.
type Relay struct {
	// Relayed, when set, is told of each VIP a peer's message made this
	// node relay; Failed of everything that went wrong on the way (a
	// message refused, a map update that failed).
	Relayed func(e Entry, from netip.Addr)
	Failed  func(error)

	mu    sync.Mutex
	plan  Plan
	vips  []netip.Addr
	built bool
	// tried: plan was tried (built, or failed at failedAt with failErr).
	tried    bool
	failedAt time.Time
	failErr  error
	conn     *net.UDPConn
	done     chan struct{}
	acks     map[uint32]chan netip.Addr
	id       atomic.Uint32
	// ns is the network namespace of the Update that built the relay:
	// the leaving map is updated there from whatever thread reads the
	// socket.
	ns *os.File
}

// Update makes the relay that of plan p and the VIPs vips (this node's
// groups'): the device is rebuilt when the peers changed, the VIPs are
// only what a peer's message may name. An empty plan removes it all.
func (r *Relay) Update(p Plan, vips []netip.Addr) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.vips = slices.Clone(vips)
	// A plan comes at every change of the cluster: the same one again
	// costs nothing, and one that failed is tried again only after
	// RetryAfter (each try runs nft).
	if r.tried && p.Equal(r.plan) {
		if r.built || p.Empty() {
			return nil
		}
		if time.Since(r.failedAt) < RetryAfter {
			return r.failErr
		}
	}
	r.tried = true
	// Also what a killed predecessor left.
	if err := r.teardownLocked(); err != nil {
		return r.failed(err)
	}
	r.plan = p
	if p.Empty() {
		return nil
	}
	ns, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return r.failed(err)
	}
	if err := build(p); err != nil {
		_ = teardown()
		ns.Close()
		return r.failed(err)
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{Port: ControlPort})
	if err != nil {
		_ = teardown()
		ns.Close()
		return r.failed(fmt.Errorf("control socket: %w", err))
	}
	r.conn, r.done, r.built, r.ns = conn, make(chan struct{}), true, ns
	go r.serve(conn, r.done, int(ns.Fd()))
	return nil
}

// inNetNS says whether the calling thread is in the network namespace ns
// (a file descriptor of it).
func inNetNS(ns int) bool {
	var a, b unix.Stat_t
	if unix.Fstat(ns, &a) != nil || unix.Stat("/proc/thread-self/ns/net", &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// RetryAfter is how long a plan that failed to build is not tried again.
const RetryAfter = 30 * time.Second

func (r *Relay) failed(err error) error {
	r.failedAt, r.failErr = time.Now(), fmt.Errorf("ecmp relay: %w", err)
	return r.failErr
}

// Plan is the plan in force.
func (r *Relay) Plan() Plan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.plan
}

// Close removes the device, the tables and the socket.
func (r *Relay) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.teardownLocked()
}

func (r *Relay) teardownLocked() error {
	if r.conn != nil {
		_ = r.conn.Close()
		<-r.done
		r.conn, r.done = nil, nil
	}
	if r.ns != nil {
		r.ns.Close()
		r.ns = nil
	}
	r.built = false
	return teardown()
}

// Leave tells every peer that this node is leaving vips: they relay the
// packets of its connections to it for d. It sends the message again every
// 20 ms to the peers that did not answer, until all have or ctx ends, and
// returns how many answered of how many there are.
func (r *Relay) Leave(ctx context.Context, vips []netip.Addr, d time.Duration) (answered, peers int) {
	r.mu.Lock()
	conn, plan := r.conn, r.plan
	if conn == nil || len(vips) == 0 {
		r.mu.Unlock()
		return 0, len(plan.Peers)
	}
	id := r.id.Add(1)
	ch := make(chan netip.Addr, len(plan.Peers))
	if r.acks == nil {
		r.acks = map[uint32]chan netip.Addr{}
	}
	r.acks[id] = ch
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.acks, id)
		r.mu.Unlock()
	}()
	msg := Message{ID: id, For: d, VIPs: vips}.Marshal()
	waiting := map[netip.Addr]bool{}
	for _, p := range plan.Peers {
		waiting[p.Addr] = true
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(waiting) > 0 {
		for a := range waiting {
			if _, err := conn.WriteToUDPAddrPort(msg, netip.AddrPortFrom(a, ControlPort)); err != nil {
				r.fail(fmt.Errorf("leaving message to %s: %w", a, err))
			}
		}
	wait:
		for {
			select {
			case a := <-ch:
				delete(waiting, a)
				if len(waiting) == 0 {
					break wait
				}
			case <-tick.C:
				break wait
			case <-ctx.Done():
				return len(plan.Peers) - len(waiting), len(plan.Peers)
			}
		}
	}
	return len(plan.Peers), len(plan.Peers)
}

// serve answers the peers' leaving messages and hands their answers to
// Leave.
func (r *Relay) serve(conn *net.UDPConn, done chan struct{}, ns int) {
	defer close(done)
	buf := make([]byte, 64<<10)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		src := from.Addr().Unmap()
		m, err := ParseMessage(buf[:n])
		if err != nil {
			r.fail(fmt.Errorf("from %s: %w", src, err))
			continue
		}
		r.mu.Lock()
		plan, vips := r.plan, r.vips
		ch := r.acks[m.ID]
		r.mu.Unlock()
		if m.Ack {
			if _, ok := plan.Peer(src); ok && ch != nil {
				select {
				case ch <- src:
				default:
				}
			}
			continue
		}
		entries, err := Accept(plan, vips, src, m)
		if err != nil {
			r.fail(err)
			continue
		}
		for _, e := range entries {
			if err := addLeaving(ns, e); err != nil {
				r.fail(fmt.Errorf("relay %s to %s: %w", e.VIP, src, err))
				continue
			}
			if r.Relayed != nil {
				r.Relayed(e, src)
			}
		}
		ack := Message{Ack: true, ID: m.ID}.Marshal()
		if _, err := conn.WriteToUDPAddrPort(ack, from); err != nil {
			r.fail(fmt.Errorf("answer to %s: %w", src, err))
		}
	}
}

func (r *Relay) fail(err error) {
	if r.Failed != nil {
		r.Failed(err)
	}
}

// build makes the device and everything on it for p.
func build(p Plan) error {
	mtu := 1500
	if l := linkWith(p.Local); l != nil {
		// The relayed packet is as large as the client's; VXLAN's 50
		// bytes more are fragmented on the way (the outer header allows
		// it) rather than the packet refused.
		mtu = l.Attrs().MTU
	}
	vx := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: Device, MTU: mtu, HardwareAddr: p.MAC},
		VxlanId:   VNI,
		SrcAddr:   p.Local.AsSlice(),
		Port:      DataPort,
		Learning:  false,
	}
	if err := netlink.LinkAdd(vx); err != nil {
		return fmt.Errorf("add %s: %w", Device, err)
	}
	link, err := netlink.LinkByName(Device)
	if err != nil {
		return err
	}
	if err := looseRPFilter(link); err != nil {
		return fmt.Errorf("rp_filter of %s: %w", Device, err)
	}
	if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: prefixNet(netip.PrefixFrom(OwnKey4, 32)), Scope: unix.RT_SCOPE_LINK}); err != nil {
		return fmt.Errorf("address of %s: %w", Device, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return err
	}
	for _, n := range KeyNets() {
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixNet(n), Scope: netlink.SCOPE_LINK}); err != nil {
			return fmt.Errorf("route %s: %w", n, err)
		}
	}
	for _, pe := range p.Peers {
		for _, k := range []netip.Addr{pe.Key4, pe.Key6} {
			fam := unix.AF_INET
			if k.Is6() {
				fam = unix.AF_INET6
			}
			if err := netlink.NeighSet(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: fam, State: netlink.NUD_PERMANENT,
				IP: k.AsSlice(), HardwareAddr: pe.MAC}); err != nil {
				return fmt.Errorf("neighbour %s of %s: %w", k, pe.Addr, err)
			}
		}
		if err := netlink.NeighAppend(&netlink.Neigh{LinkIndex: link.Attrs().Index, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF,
			State: netlink.NUD_PERMANENT, IP: pe.Addr.AsSlice(), HardwareAddr: pe.MAC}); err != nil {
			return fmt.Errorf("forwarding entry of %s: %w", pe.Addr, err)
		}
	}
	return nft(SetupScript())
}

// looseRPFilter sets the device's rp_filter to 2 (loose): strict
// reverse-path filtering (the effective value is the larger of 'all' and
// the device's) would drop every relayed packet, whose source is a
// client's, routed elsewhere. Over netlink (IFLA_INET_CONF), not
// /proc/sys, which a container without privileges has read-only.
func looseRPFilter(link netlink.Link) error {
	const (
		iflaInetConf        = 1 // IFLA_INET_CONF
		ipv4DevconfRPFilter = 8 // IPV4_DEVCONF_RP_FILTER
	)
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(link.Attrs().Index)
	req.AddData(msg)
	spec := nl.NewRtAttr(unix.IFLA_AF_SPEC, nil)
	conf := spec.AddRtAttr(unix.AF_INET, nil).AddRtAttr(iflaInetConf, nil)
	conf.AddRtAttr(ipv4DevconfRPFilter, nl.Uint32Attr(2))
	req.AddData(spec)
	_, err := req.Execute(unix.NETLINK_ROUTE, 0)
	return err
}

// teardown removes the tables and the device.
func teardown() error {
	var errs []error
	if err := nft(TeardownScript()); err != nil {
		errs = append(errs, err)
	}
	if l, err := netlink.LinkByName(Device); err == nil {
		if err := netlink.LinkDel(l); err != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", Device, err))
		}
	}
	return errors.Join(errs...)
}

// linkWith is the link that holds a, nil if none.
func linkWith(a netip.Addr) netlink.Link {
	fam := netlink.FAMILY_V4
	if a.Is6() {
		fam = netlink.FAMILY_V6
	}
	addrs, err := netlink.AddrList(nil, fam)
	if err != nil {
		return nil
	}
	for _, ad := range addrs {
		if b, ok := netip.AddrFromSlice(ad.IP); ok && b.Unmap() == a {
			l, err := netlink.LinkByIndex(ad.LinkIndex)
			if err == nil {
				return l
			}
		}
	}
	return nil
}

// addLeaving puts e in the leaving map of its family, replacing an entry
// for the VIP (another node's, or this one's older), in namespace ns.
func addLeaving(ns int, e Entry) error {
	fam, typ := nftables.TableFamilyIPv4, nftables.TypeIPAddr
	if e.VIP.Is6() {
		fam, typ = nftables.TableFamilyIPv6, nftables.TypeIP6Addr
	}
	// Entering ns by its descriptor needs CAP_SYS_ADMIN (setns), which
	// lbconfig's BGP pod does not have (every relay failed there with
	// "setns: operation not permitted"); a thread already in it needs
	// none. Only tests run the relay of a namespace other than the
	// process's. The thread stays put between the check and the socket.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var opts []nftables.ConnOption
	if !inNetNS(ns) {
		opts = append(opts, nftables.WithNetNSFd(ns))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return err
	}
	set := &nftables.Set{Table: &nftables.Table{Name: Table, Family: fam}, Name: LeavingMap,
		IsMap: true, HasTimeout: true, KeyType: typ, DataType: typ}
	return nftmap.Put(c, set, []nftables.SetElement{{Key: e.VIP.AsSlice(), Val: e.Key.AsSlice(), Timeout: e.For}})
}

// nft runs an nft script.
func nft(script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 0 {
			return fmt.Errorf("nft: %s", strings.TrimSpace(string(out)))
		}
		return fmt.Errorf("nft: %w", err)
	}
	return nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
