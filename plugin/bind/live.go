package bind

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/coredns/coredns/core/dnsserver"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/miekg/dns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

var log = clog.NewWithPlugin(pluginName)

// interfaces returns every interface's addresses by name, as the kernel
// reports them now.
func interfaces() (map[string][]Addr, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	out := map[string][]Addr{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
		out[l.Attrs().Name] = nil
	}
	addrs, err := netlink.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		name, known := names[a.LinkIndex]
		if !ok || !known {
			continue
		}
		out[name] = append(out[name], Addr{IP: ip.Unmap(), Usable: a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0})
	}
	return out, nil
}

// bindable returns the hosts a socket can be bound to now.
func bindable(hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if pc, err := net.ListenPacket("udp", net.JoinHostPort(h, "0")); err == nil {
			pc.Close()
			out = append(out, h)
		}
	}
	return out
}

// live serves, on its own listeners, the hosts that were not bindable when
// the server started (CoreDNS's listeners serve those that were), and stops
// serving them when they go away. Queries on them go through the server
// block's own dnsserver.Server, so zones, plugins and metrics are the same.
type live struct {
	dirs    []Directive
	port    string
	initial []string

	mu      sync.Mutex
	servers []*dnsserver.Server
	extra   map[string][]*dns.Server

	// decorate is the UDP writer decorator set before bind's, if any.
	decorate func(*dnsserver.Server) dns.DecorateWriter
	// poke asks run to reconcile now: the first server has started.
	poke chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newLive(dirs []Directive, port string, initial []string) *live {
	return &live{dirs: dirs, port: port, initial: initial, extra: map[string][]*dns.Server{}, poke: make(chan struct{}, 1)}
}

// capture is called by dnsserver for each UDP server it starts (after the
// OnStartup hooks: run has started and found no server yet).
func (l *live) capture(s *dnsserver.Server) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.servers = append(l.servers, s)
	select {
	case l.poke <- struct{}{}:
	default:
	}
}

func (l *live) start() error {
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.run()
	return nil
}

func (l *live) shutdown() error {
	if l.stop == nil {
		return nil
	}
	close(l.stop)
	<-l.done
	return nil
}

// retry is how often hosts that could not be bound are tried again when no
// address event came (a lost netlink message, a socket still closing).
const retry = time.Second

func (l *live) run() {
	defer close(l.done)
	defer l.closeAll()
	updates := make(chan netlink.AddrUpdate, 64)
	nlDone := make(chan struct{})
	defer close(nlDone)
	if err := netlink.AddrSubscribeWithOptions(updates, nlDone, netlink.AddrSubscribeOptions{
		ErrorCallback: func(err error) { log.Warningf("address events: %v (polling every %v)", err, retry) },
	}); err != nil {
		log.Warningf("address events: %v (polling every %v)", err, retry)
		updates = nil
	}
	tick := time.NewTicker(retry)
	defer tick.Stop()
	for {
		l.reconcile()
		select {
		case <-l.stop:
			return
		case _, ok := <-updates:
			if !ok {
				updates = nil
			}
		case <-l.poke:
		case <-tick.C:
		}
	}
}

func (l *live) reconcile() {
	ifaces, err := interfaces()
	if err != nil {
		log.Warningf("interfaces: %v", err)
		return
	}
	hosts, err := Hosts(l.dirs, ifaces)
	if err != nil {
		return // an interface named at start is gone; keep what is served
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for h, srvs := range l.extra {
		if !slices.Contains(hosts, h) {
			shutdown(srvs)
			delete(l.extra, h)
			log.Infof("stopped answering on %s: the address is gone", h)
		}
	}
	if len(l.servers) == 0 {
		return // dnsserver has not started: the next event or tick
	}
	for _, h := range hosts {
		if _, ok := l.extra[h]; ok || slices.Contains(l.initial, h) {
			continue
		}
		ahead := !onHost(h, ifaces)
		srvs, err := l.listen(h, l.servers[0], ahead)
		if err != nil {
			log.Debugf("%s: %v", h, err)
			continue // tentative, or not there yet: tried again later
		}
		l.extra[h] = srvs
		if ahead {
			log.Infof("answering on %s as soon as the host has it (bound ahead of the address)", h)
		} else {
			log.Infof("answering on %s (an address added after the start)", h)
		}
	}
}

// onHost says whether host h (an address, IPv6 link-local ones zoned) is
// one of the interfaces' addresses now, usable or not.
func onHost(h string, ifaces map[string][]Addr) bool {
	a, err := netip.ParseAddr(h)
	if err != nil {
		return false
	}
	a = a.WithZone("")
	for _, addrs := range ifaces {
		for _, ad := range addrs {
			if ad.IP == a {
				return true
			}
		}
	}
	return false
}

// listen serves h on the server block's server s. A literal address the
// host does not have yet (a VIP named in the Corefile) is bound ahead with
// IP_FREEBIND: the kernel delivers its queries the moment keepalived adds
// it. Following the address event instead cost 272-650 ms on a busy node
// in the rolling-upgrade test, while a node whose own CoreDNS restarted
// sent its lookups to the API VIP just moved there.
func (l *live) listen(h string, s *dnsserver.Server, ahead bool) ([]*dns.Server, error) {
	addr := net.JoinHostPort(h, l.port)
	lc := net.ListenConfig{Control: sockopts(ahead)}
	pc, err := lc.ListenPacket(context.Background(), "udp", addr)
	if err != nil {
		return nil, err
	}
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		pc.Close()
		return nil, err
	}
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		ctx := context.WithValue(context.Background(), dnsserver.Key{}, s)
		ctx = context.WithValue(ctx, dnsserver.LoopKey{}, 0)
		s.ServeDNS(ctx, w, r)
	})
	// As CoreDNS's own listeners of the block are (dnsserver.Server's Serve
	// and ServePacket): its TSIG secrets, TCP limits and timeouts, and the
	// UDP writer decorator another plugin set before this one.
	var dw dns.DecorateWriter
	if l.decorate != nil {
		dw = l.decorate(s)
	}
	srvs := []*dns.Server{
		{PacketConn: pc, Net: "udp", Handler: handler, TsigSecret: s.TsigSecret, DecorateWriter: dw},
		{Listener: ln, Net: "tcp", Handler: handler, TsigSecret: s.TsigSecret, MaxTCPQueries: s.MaxTCPQueries,
			ReadTimeout: s.ReadTimeout, WriteTimeout: s.WriteTimeout, IdleTimeout: func() time.Duration { return s.IdleTimeout }},
	}
	for _, srv := range srvs {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go func() { _ = srv.ActivateAndServe() }()
		// Shutdown of a server not yet started would leave its socket open.
		select {
		case <-started:
		case <-time.After(time.Second):
		}
	}
	return srvs, nil
}

func (l *live) closeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for h, srvs := range l.extra {
		shutdown(srvs)
		delete(l.extra, h)
	}
}

func shutdown(srvs []*dns.Server) {
	for _, s := range srvs {
		_ = s.Shutdown()
	}
}

// sockopts sets SO_REUSEPORT (CoreDNS's multisocket listeners share the
// address) and, for an address bound ahead of the host having it,
// IP_FREEBIND or IPV6_FREEBIND.
func sockopts(freebind bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); serr != nil || !freebind {
				return
			}
			if network == "udp6" || network == "tcp6" {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IPV6, unix.IPV6_FREEBIND, 1)
			} else {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_IP, unix.IP_FREEBIND, 1)
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}
