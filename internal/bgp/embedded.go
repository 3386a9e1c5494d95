package bgp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/infradns/infradns/internal/cluster"
)

// Embedded is a GoBGP speaker in this process: it connects to its peers
// (it listens on no port, so it needs no privilege for :179 and clashes
// with no speaker the host runs) and announces the routes with origin IGP
// and no MED, as every node does: a path that differs in either is not
// multipathed by the ToR (FRR picks one best path).
type Embedded struct {
	s     *server.BgpServer
	peers []cluster.BGPPeer
	asn   uint32
	log   Logger
	// Changed, when set, is called after a session goes up or down.
	Changed func()

	cancel context.CancelFunc
	mu     sync.Mutex
	paths  map[netip.Prefix]*apiutil.Path
	up     map[netip.Addr]bool
	since  map[netip.Addr]time.Time
}

// NewEmbedded starts a speaker with the node's settings (cluster.BGP with
// its defaults; a missing router ID is the node's address towards its
// first IPv4 peer) and adds its peers; sessions come up in the background.
func NewEmbedded(ctx context.Context, cfg cluster.BGP, log Logger) (*Embedded, error) {
	rid := cfg.RouterID
	if !rid.IsValid() {
		var err error
		if rid, err = RouterIDFor(cfg.Peers); err != nil {
			return nil, err
		}
	}
	// GoBGP's own log: warnings and errors only; sessions are logged here.
	lg := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lv := &slog.LevelVar{}
	lv.Set(slog.LevelWarn)
	s := server.NewBgpServer(server.LoggerOption(lg, lv))
	go s.Serve()
	e := &Embedded{s: s, peers: cfg.Peers, asn: cfg.ASN, log: log,
		paths: map[netip.Prefix]*apiutil.Path{}, up: map[netip.Addr]bool{}, since: map[netip.Addr]time.Time{}}
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: cfg.ASN, RouterId: rid.String(), ListenPort: -1}}); err != nil {
		s.Stop()
		return nil, fmt.Errorf("start BGP (asn %d, router id %s): %w", cfg.ASN, rid, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	if err := s.WatchEvent(wctx, server.WatchEventMessageCallbacks{OnPeerUpdate: e.peerEvent}, server.WatchPeer()); err != nil {
		cancel()
		s.Stop()
		return nil, fmt.Errorf("watch BGP sessions: %w", err)
	}
	go e.nag(wctx, time.Now())
	for _, p := range cfg.Peers {
		if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
			cancel()
			s.Stop()
			return nil, fmt.Errorf("peer %s: %w", p.Address, err)
		}
		log.Infof("BGP peer %s (AS %d) added; AS %d, router id %s, BFD %s", p.Address, p.ASN, cfg.ASN, rid, bfdWords(p.BFD))
	}
	return e, nil
}

// nag says, 10 s after the start and then ever more seldom (doubling to
// 5 min), which peers have no session: GoBGP retries a peer every second
// without a word, and a VIP no one announces is silent too.
func (e *Embedded) nag(ctx context.Context, start time.Time) {
	wait := 10 * time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		var down []string
		for _, s := range e.Sessions() {
			if !s.Up {
				down = append(down, fmt.Sprintf("%s (AS %d)", s.Peer, s.ASN))
			}
		}
		if len(down) > 0 {
			e.log.Warningf("no BGP session with %s (speaker up for %s); retrying every second", strings.Join(down, ", "), time.Since(start).Round(time.Second))
			wait = min(2*wait, 5*time.Minute)
		} else {
			wait = 10 * time.Second
		}
	}
}

func bfdWords(b cluster.BFD) string {
	if b.Off {
		return "off"
	}
	return fmt.Sprintf("%s x %d", b.Interval, b.Multiplier)
}

// RouterIDFor is the node's address towards the first IPv4 peer: what the
// kernel would use as the source (found without sending a packet).
func RouterIDFor(peers []cluster.BGPPeer) (netip.Addr, error) {
	for _, p := range peers {
		if !p.Address.Is4() {
			continue
		}
		c, err := net.Dial("udp4", netip.AddrPortFrom(p.Address, p.Port).String())
		if err != nil {
			return netip.Addr{}, fmt.Errorf("router id: no route to peer %s: %w", p.Address, err)
		}
		defer c.Close()
		ap := c.LocalAddr().(*net.UDPAddr).AddrPort()
		return ap.Addr().Unmap(), nil
	}
	return netip.Addr{}, errors.New("router id: no IPv4 peer to find it from: set it")
}

func apiPeer(p cluster.BGPPeer) *api.Peer {
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if p.Address.Is6() {
		fam.Afi = api.Family_AFI_IP6
	}
	ap := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.ASN, AuthPassword: p.Password},
		Timers: &api.Timers{Config: &api.TimersConfig{
			// 1 s between connection attempts: the peer is a ToR on the
			// node's own link, and a session must come back fast.
			ConnectRetry:      1,
			HoldTime:          uint64(p.HoldTime / time.Second),
			KeepaliveInterval: uint64(p.Keepalive / time.Second),
			// Withdrawals and updates leave at once, not batched.
			MinimumAdvertisementInterval: 0,
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: fam, Enabled: true}}},
	}
	if !p.BFD.Off {
		us := uint32(p.BFD.Interval / time.Microsecond)
		ap.Bfd = &api.BfdPeerConfig{Enabled: true, DesiredMinimumTxInterval: us, RequiredMinimumReceive: us,
			DetectionMultiplier: uint32(p.BFD.Multiplier)}
	}
	return ap
}

func (e *Embedded) peerEvent(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
	if ev.Type != apiutil.PEER_EVENT_STATE {
		return
	}
	addr := ev.Peer.State.NeighborAddress
	if !addr.IsValid() {
		addr = ev.Peer.Conf.NeighborAddress
	}
	addr = addr.Unmap()
	up := ev.Peer.State.SessionState == bgp.BGP_FSM_ESTABLISHED
	e.mu.Lock()
	was := e.up[addr]
	e.up[addr] = up
	if was != up {
		e.since[addr] = time.Now()
	}
	e.mu.Unlock()
	switch {
	case up && !was:
		e.log.Infof("BGP session with %s established", addr)
	case was && !up:
		e.log.Warningf("BGP session with %s down: %s %s", addr, ev.Peer.State.DisconnectReason, ev.Peer.State.DisconnectMessage)
		// GoBGP v4.8.0: after a BFD expiry the "BFD is down" reset stays
		// queued in the old FSM and kills every new session right after
		// it is established (lab: no recovery in 2 min). A fresh peer has
		// a fresh FSM and BFD session.
		go e.readd(addr)
	}
	if was != up && e.Changed != nil {
		e.Changed()
	}
}

func (e *Embedded) readd(addr netip.Addr) {
	i := slices.IndexFunc(e.peers, func(p cluster.BGPPeer) bool { return p.Address == addr })
	if i < 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.s.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
		e.log.Warningf("BGP peer %s: reset: %v", addr, err)
		return
	}
	if err := e.s.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(e.peers[i])}); err != nil {
		e.log.Errorf("BGP peer %s: re-add: %v", addr, err)
	}
}

// Sessions implements Speaker.
func (e *Embedded) Sessions() []Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Session, 0, len(e.peers))
	for _, p := range e.peers {
		out = append(out, Session{Peer: p.Address, ASN: p.ASN, Up: e.up[p.Address]})
	}
	return out
}

// Announce implements Speaker.
func (e *Embedded) Announce(_ context.Context, routes []netip.Prefix) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var have []netip.Prefix
	for p := range e.paths {
		have = append(have, p)
	}
	add, del := diff(sortPrefixes(have), sortPrefixes(slices.Clone(routes)))
	var errs []error
	for _, p := range del {
		if err := e.s.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{e.paths[p]}}); err != nil {
			errs = append(errs, fmt.Errorf("withdraw %s: %w", p, err))
			continue
		}
		delete(e.paths, p)
	}
	for _, p := range add {
		path, err := hostPath(p)
		if err == nil {
			_, err = e.s.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}})
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("announce %s: %w", p, err))
			continue
		}
		e.paths[p] = path
	}
	return errors.Join(errs...)
}

// hostPath is a locally originated path for p: origin IGP, next hop
// unspecified (GoBGP puts the session's own address there).
func hostPath(p netip.Prefix) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(p)
	if err != nil {
		return nil, err
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if p.Addr().Is4() {
		nh, err := bgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, err
		}
		return &apiutil.Path{Family: bgp.RF_IPv4_UC, Nlri: nlri, Attrs: append(attrs, nh)}, nil
	}
	mp, err := bgp.NewPathAttributeMpReachNLRI(bgp.RF_IPv6_UC, []bgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
	if err != nil {
		return nil, err
	}
	return &apiutil.Path{Family: bgp.RF_IPv6_UC, Nlri: nlri, Attrs: append(attrs, mp)}, nil
}

// Close implements Speaker: routes withdrawn, then every session closed with
// a Cease (the peer drops this node's routes at once, not after the hold
// time).
func (e *Embedded) Close(ctx context.Context) error {
	err := e.Announce(ctx, nil)
	e.cancel()
	e.s.Stop() // StopBgp (a Cease to every peer), then the BFD server
	return err
}
