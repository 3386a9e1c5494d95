package lbconfig

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/coredns/caddy"

	"github.com/infradns/infradns/internal/bgp"
	"github.com/infradns/infradns/internal/cluster"
	"github.com/infradns/infradns/internal/lb"
	"github.com/infradns/infradns/internal/secret"
)

// goodbyeLimit bounds a stop's withdraw, drain and session close.
const goodbyeLimit = 5 * time.Second

// One announcer per process, shared across Corefile reloads: during a
// reload the new lbconfig starts before the old one stops, and a speaker of
// its own would collide with the old one's sessions (the peer keeps the
// established one) and the old one's stop would withdraw what the new one
// announces. Every started instance holds a reference (the last one stopped
// says goodbye: withdraw, drain, close); the speaker follows the settings of
// the newest instance caddy adopted (a failed reload's instance is never
// adopted, so it never replaces the speaker).
var shared struct {
	sync.Mutex
	key    string
	gen    uint64 // the generation whose settings the speaker has
	ann    *bgp.Announcer
	refs   int
	cancel context.CancelFunc
	done   chan struct{}
	// relay is the hand-over relay, made with the announcer and closed
	// after its goodbye; relayErr its last error, logged once.
	relay    handOver
	relayErr string
}

// checkSpeaker refuses settings a speaker cannot start with, at Start: the
// speaker is made only once the instance is adopted, and a wrong option
// must still stop CoreDNS from starting (or a reload from happening).
func checkSpeaker(cfg cluster.BGP) error {
	if cfg.Speaker == cluster.SpeakerTable || cfg.RouterID.IsValid() {
		return nil
	}
	_, err := bgp.RouterIDFor(cfg.Peers)
	return err
}

// holdAnnouncer takes a reference: the announcer (once there is one) stays
// until it is released.
func holdAnnouncer() {
	shared.Lock()
	shared.refs++
	shared.Unlock()
}

// followAnnouncer returns the process's announcer with the settings of
// generation gen, starting it or switching it to a new speaker when they
// changed; a speaker that cannot be made is retried until ctx ends. nil:
// ctx ended, or a newer generation owns the announcer (gen is stale).
func followAnnouncer(ctx context.Context, gen uint64, cfg cluster.BGP) *bgp.Announcer {
	delay := 200 * time.Millisecond
	for {
		ann, err := follow(gen, cfg)
		if err == nil || errors.Is(err, errSuperseded) {
			if err != nil {
				log.Errorf("bgp: %v", err)
			}
			return ann
		}
		log.Errorf("bgp: %v (retry in %s)", err, delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, 30*time.Second)
	}
}

func follow(gen uint64, cfg cluster.BGP) (*bgp.Announcer, error) {
	shared.Lock()
	defer shared.Unlock()
	if gen < shared.gen {
		return nil, errSuperseded
	}
	key := fmt.Sprintf("%+v", cfg)
	if shared.ann != nil && shared.key == key {
		shared.gen = gen
		return shared.ann, nil
	}
	sp, err := speakerFor(cfg)
	if err != nil {
		return nil, err
	}
	shared.key, shared.gen = key, gen
	if shared.ann != nil {
		// New settings: the old speaker withdraws and closes, the new one
		// announces what the announcer holds.
		log.Infof("BGP settings changed: replacing the speaker")
		shared.ann.SetSpeaker(sp)
		return shared.ann, nil
	}
	ann := bgp.NewAnnouncer(sp, localVIPs, log)
	ann.Announced = announcedMetric
	ann.Leaving = leaving
	shared.relay = newHandOver()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		ann.Run(ctx, goodbyeLimit)
	}()
	shared.ann, shared.cancel, shared.done = ann, cancel, done
	return ann, nil
}

// releaseAnnouncer drops one reference; the last one says goodbye and
// returns once the routes are withdrawn, drained and the sessions closed.
func releaseAnnouncer() {
	shared.Lock()
	shared.refs--
	if shared.refs > 0 || shared.ann == nil {
		shared.Unlock()
		return
	}
	cancel, done := shared.cancel, shared.done
	shared.ann, shared.key, shared.cancel, shared.done = nil, "", nil, nil
	shared.Unlock()
	cancel()
	<-done
	// After the goodbye: the drain took relayed packets for the VIPs.
	shared.Lock()
	relay := shared.relay
	shared.relay, shared.relayErr = nil, ""
	shared.Unlock()
	if relay != nil {
		if err := relay.Close(); err != nil {
			log.Errorf("hand-over relay: %v", err)
		}
	}
}

// speakerFor and localVIPs are the real speaker and local routes; tests
// that run a real CoreDNS reload in this process replace them.
var (
	speakerFor               = newSpeaker
	localVIPs  bgp.LocalVIPs = bgp.LocalRoutes{}
)

func newSpeaker(cfg cluster.BGP) (bgp.Speaker, error) {
	if cfg.Speaker == cluster.SpeakerTable {
		return bgp.Table{ID: cfg.Table}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e, err := bgp.NewEmbedded(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	for _, p := range cfg.Peers {
		bgpSessionUp.WithLabelValues(p.Address.String()).Set(0)
	}
	e.Changed = func() {
		for _, s := range e.Sessions() {
			v := 0.0
			if s.Up {
				v = 1
			}
			bgpSessionUp.WithLabelValues(s.Peer.String()).Set(v)
		}
	}
	return e, nil
}

var (
	announcedMu  sync.Mutex
	announcedNow = map[netip.Prefix]bool{}
	// announcedKeep are the cluster's VIPs: their series stay, at 0,
	// when withdrawn. A Service's address loses its series instead: the
	// Services come and go, and every address ever announced would stay.
	announcedKeep = map[netip.Addr]bool{}
)

// keepAnnouncedSeries names the VIPs whose series outlive a withdrawal.
func keepAnnouncedSeries(vips []netip.Addr) {
	announcedMu.Lock()
	defer announcedMu.Unlock()
	clear(announcedKeep)
	for _, v := range vips {
		announcedKeep[v.Unmap()] = true
	}
}

func announcedMetric(routes []netip.Prefix) {
	announcedMu.Lock()
	defer announcedMu.Unlock()
	for p := range announcedNow {
		announcedNow[p] = false
	}
	for _, p := range routes {
		announcedNow[p] = true
	}
	for p, on := range announcedNow {
		switch {
		case on:
			bgpAnnounced.WithLabelValues(p.Addr().String()).Set(1)
		case announcedKeep[p.Addr()]:
			bgpAnnounced.WithLabelValues(p.Addr().String()).Set(0)
		default:
			bgpAnnounced.DeleteLabelValues(p.Addr().String())
			delete(announcedNow, p)
		}
	}
}

// bgpGroups are a plan's groups as the announcer takes them.
func bgpGroups(p lb.Plan) []bgp.Group {
	out := make([]bgp.Group, 0, len(p.Groups))
	for _, g := range p.Groups {
		out = append(out, bgp.Group{Name: g.Name, Check: g.Check, VIPs: g.VIPs})
	}
	return out
}

// parseBGPPeer reads `bgp-peer ADDRESS ASN [port N] [password-file PATH]
// [hold DURATION] [keepalive DURATION] [bfd off|INTERVAL MULTIPLIER]`.
func parseBGPPeer(c *caddy.Controller, args []string) (cluster.BGPPeer, error) {
	if len(args) < 2 {
		return cluster.BGPPeer{}, c.Errf("bgp-peer needs ADDRESS ASN [port N] [password-file PATH] [hold DURATION] [keepalive DURATION] [bfd off|INTERVAL MULTIPLIER]")
	}
	var p cluster.BGPPeer
	a, err := netip.ParseAddr(args[0])
	if err != nil || a.Zone() != "" {
		return p, c.Errf("bgp-peer: %q is not an IP address", args[0])
	}
	p.Address = a.Unmap()
	if p.ASN, err = parseASN(args[1]); err != nil {
		return p, c.Errf("bgp-peer %s: %v", args[0], err)
	}
	rest := args[2:]
	seen := map[string]bool{}
	for len(rest) > 0 {
		k := rest[0]
		if seen[k] {
			return p, c.Errf("bgp-peer %s: %s given twice", args[0], k)
		}
		seen[k] = true
		need := 1
		if k == "bfd" && len(rest) > 1 && rest[1] != "off" {
			need = 2
		}
		if len(rest) < 1+need {
			return p, c.Errf("bgp-peer %s: %s needs a value", args[0], k)
		}
		v := rest[1 : 1+need]
		rest = rest[1+need:]
		switch k {
		case "port":
			n, err := strconv.ParseUint(v[0], 10, 16)
			if err != nil || n == 0 {
				return p, c.Errf("bgp-peer %s: port must be in [1, 65535]: %q", args[0], v[0])
			}
			p.Port = uint16(n)
		case "password":
			// Not even for a hand-written Corefile: a Corefile is no place
			// for a secret (render-node writes it 0644 where the DNS pod
			// reads it, copies it into MachineConfigs and diffs, and a
			// parse error may echo a token). The value is not quoted.
			return p, c.Errf("bgp-peer %s: an inline password is refused: a Corefile is readable by everyone who reads the configuration; put the password in a file only root can read (0600) and give password-file PATH", args[0])
		case "password-file":
			if err := cluster.CheckPath(v[0]); err != nil {
				return p, c.Errf("bgp-peer %s: password-file: %v", args[0], err)
			}
			pw, err := readBGPPassword(v[0])
			if err != nil {
				return p, c.Errf("bgp-peer %s: password-file: %v", args[0], err)
			}
			p.PasswordFile, p.Password = v[0], pw
		case "hold", "keepalive":
			d, err := time.ParseDuration(v[0])
			if err != nil {
				return p, c.Errf("bgp-peer %s: %s: %v", args[0], k, err)
			}
			if k == "hold" {
				p.HoldTime = d
			} else {
				p.Keepalive = d
			}
		case "bfd":
			if v[0] == "off" {
				p.BFD.Off = true
				continue
			}
			d, err := time.ParseDuration(v[0])
			if err != nil {
				return p, c.Errf("bgp-peer %s: bfd interval: %v", args[0], err)
			}
			m, err := strconv.Atoi(v[1])
			if err != nil {
				return p, c.Errf("bgp-peer %s: bfd multiplier %q: want a number", args[0], v[1])
			}
			p.BFD.Interval, p.BFD.Multiplier = d, m
		default:
			return p, c.Errf("bgp-peer %s: unknown setting %q (port, password-file, hold, keepalive, bfd)", args[0], k)
		}
	}
	return p, nil
}

func parseASN(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("AS number %q: want a number in [1, 4294967294]", s)
	}
	return uint32(n), nil
}

// readBGPPassword reads a TCP MD5 password file at setup: a root-only
// (0600) regular file of one line, its newline optional, that the peers'
// configurations can spell (cluster.CheckBGPPassword). The password is
// read once; a changed file takes a restart of the pod (or a changed
// Corefile).
func readBGPPassword(path string) (string, error) {
	// A bound against reading a wrong file whole; the length rule is
	// CheckBGPPassword's, which says by how much.
	b, err := secret.ReadFile(path, 4096)
	if err != nil {
		return "", err
	}
	pw, err := cluster.ParseBGPPasswordFile(b)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return pw, nil
}
