package mdns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// QueryWindow is how long after its first query a browser counts as ready:
// responders answer shared records within 20–120 ms (RFC 6762 6), so every
// node on the link has answered by then.
const QueryWindow = time.Second

// BrowserConfig configures a resolver's listener.
type BrowserConfig struct {
	Interface string
	Bind      netip.Addr
	Filter    Filter
	Keys      [][]byte // require announcements signed with one of these when set
	Logger    *slog.Logger
	// OnHeard receives every new snapshot of what is served; it must not
	// block, and it may keep the snapshot.
	OnHeard func(Heard)
	// OnResult receives what each accepted response did (for metrics).
	OnResult func(Result)
	// OnQuery is called for each query sent.
	OnQuery func()
}

// Browser listens to the link all the time, keeps the Cache, queries
// with backoff and refreshes records before they expire.
type Browser struct {
	cfg   BrowserConfig
	log   *slog.Logger
	ready atomic.Bool
}

// NewBrowser returns a Browser for cfg.
func NewBrowser(cfg BrowserConfig) (*Browser, error) {
	if cfg.Interface == "" && !cfg.Bind.IsValid() {
		return nil, errors.New("an interface or a bind address is required")
	}
	if cfg.Filter.Service == "" {
		cfg.Filter.Service = DefaultServiceType + "." + DefaultDomain
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.OnHeard == nil {
		cfg.OnHeard = func(Heard) {}
	}
	if cfg.OnResult == nil {
		cfg.OnResult = func(Result) {}
	}
	if cfg.OnQuery == nil {
		cfg.OnQuery = func() {}
	}
	return &Browser{cfg: cfg, log: cfg.Logger}, nil
}

// Ready reports whether the first query window has passed.
func (b *Browser) Ready() bool { return b.ready.Load() }

// Run listens until ctx ends, then closes its sockets. It keeps waiting
// (and retrying) while the interface is missing.
func (b *Browser) Run(ctx context.Context) error {
	var verifier *Verifier
	if len(b.cfg.Keys) > 0 {
		verifier = NewVerifier(b.cfg.Keys...)
	}
	cache := NewCache(b.cfg.Filter, verifier)
	logged := false
	for {
		err := b.run(ctx, cache)
		if ctx.Err() != nil {
			return nil
		}
		if !logged {
			b.log.Warn("mdns listener not running, retrying", "error", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (b *Browser) run(ctx context.Context, cache *Cache) error {
	ifi, err := FindInterface(b.cfg.Interface, b.cfg.Bind)
	if err != nil {
		return err
	}
	conn, err := Listen(ctx, ifi)
	if err != nil {
		return err
	}
	in := make(chan Packet, 256)
	stop, readDone := make(chan struct{}), make(chan struct{})
	go func() { conn.Read(in, stop); close(readDone) }()
	defer func() { close(stop); conn.Close(); <-readDone }()
	v4, v6 := conn.Families()
	b.log.Info("listening", "interface", ifi.Name, "ipv4", v4, "ipv6", v6)

	now := time.Now()
	backoff := NewBackoff(now, 20*time.Millisecond+rand.N(FirstQueryDelayMax-20*time.Millisecond))
	readyAt := backoff.Next().Add(QueryWindow)
	timer := time.NewTimer(0)
	defer timer.Stop()
	check := time.NewTicker(time.Second)
	defer check.Stop()
	// Snapshots are rate-limited: PublishBurst at once, then one per PublishInterval.
	pub := NewCoalescer(PublishInterval, PublishBurst)

	for {
		select {
		case <-ctx.Done():
			return nil
		case p := <-in:
			if b.handle(conn, cache, p) {
				pub.Changed()
			}
		case <-check.C:
			// The interface was removed (or recreated with a new index):
			// reopen the sockets on what is there now.
			if cur, err := FindInterface(b.cfg.Interface, b.cfg.Bind); err != nil || cur.Index != ifi.Index {
				return fmt.Errorf("interface %s changed", ifi.Name)
			}
		case <-timer.C:
		}
		now := time.Now()
		if backoff.Step(now) {
			b.query(conn, []dns.Question{{Name: b.cfg.Filter.Service, Qtype: dns.TypePTR, Qclass: dns.ClassINET}})
		}
		if cache.Expire(now) {
			pub.Changed()
		}
		if pub.Publish(now) {
			b.cfg.OnHeard(cache.Heard(now))
		}
		if qs := cache.Due(now); len(qs) > 0 {
			b.query(conn, qs)
		}
		if !b.ready.Load() && !now.Before(readyAt) {
			b.ready.Store(true)
		}
		next := backoff.Next()
		if c := cache.Next(); !c.IsZero() && c.Before(next) {
			next = c
		}
		if !b.ready.Load() && readyAt.Before(next) {
			next = readyAt
		}
		if p := pub.Next(); !p.IsZero() && p.Before(next) {
			next = p
		}
		// Wake at least every second so a stepped wall clock cannot stall us.
		resetTimer(timer, min(time.Until(next), time.Second))
	}
}

// handle applies one received packet to the cache and reports whether that
// changed what is served.
func (b *Browser) handle(conn *Conn, cache *Cache, p Packet) bool {
	// Responses must come from port 5353 (RFC 6762 6) and, being link-local,
	// with TTL 255: a smaller value crossed a router (11).
	if p.Src.Port() != Port || (p.HopLimit >= 0 && p.HopLimit != 255) {
		return false
	}
	m, err := ParsePacket(p.Data)
	if err != nil || !m.Response {
		return false
	}
	res := cache.Process(time.Now(), p.Src.Addr(), m)
	b.cfg.OnResult(res)
	if len(res.Query) > 0 {
		b.query(conn, res.Query)
	}
	return res.Changed
}

func (b *Browser) query(conn *Conn, qs []dns.Question) {
	m := new(dns.Msg)
	m.Question = qs
	buf, err := m.Pack()
	if err != nil {
		b.log.Error("pack query", "error", err)
		return
	}
	if err := conn.Multicast(buf); err != nil && !errors.Is(err, net.ErrClosed) {
		b.log.Debug("send query", "error", err)
	}
	b.cfg.OnQuery()
}
