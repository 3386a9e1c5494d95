package lb

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
)

// DefaultProbeInterval is how often a health check runs.
const DefaultProbeInterval = 500 * time.Millisecond

// DefaultWatchInterval is how often, between checks, the checked port is
// connected to: a refused connection (the process died or closed its port)
// fails the check at once, without waiting for the next probe or for Fall
// failures. A connect to loopback costs tens of microseconds.
const DefaultWatchInterval = 100 * time.Millisecond

// Prober keeps keepalived track files in step with an HTTP health check:
// "0" after Rise successes in a row, "1" after Fall failures in a row, so
// one lost or slow probe does not move a VIP. A refused connection is no
// such doubt: nothing listens, so it fails the check at once, and between
// probes the port is connected to every Watch so a dead haproxy or router
// is noticed within Watch, not Interval × Fall (the lab measured 506-980
// ms from SIGKILL to FAULT without it). Until the first verdict the files
// are left alone (keepalived creates them as 1: unhealthy).
type Prober struct {
	URL string
	// Paths are the track files of the groups this check gates.
	Paths    []string
	Interval time.Duration
	Rise     int
	Fall     int
	// Watch is the interval of the connect checks between probes; 0 means
	// DefaultWatchInterval, negative none.
	Watch time.Duration
	// Stopping, when set, is a file whose presence fails the check at
	// once, looked at every Watch: the checked daemon says it is about to
	// stop (see HAProxyStopping), so its VIPs leave while it still serves.
	Stopping string
	// Open, when set, may hold a healthy file at 1 a while longer (a group
	// waiting for the node it prefers; see ClaimGate), given the time the
	// check last became healthy. known false leaves a healthy file alone.
	Open func(path string, healthySince, now time.Time) (open, known bool)
	// Client makes the requests; nil means one with a timeout of Interval.
	Client *http.Client
	// Changed, when set, is called with each new verdict.
	Changed func(healthy bool)
	// Stops, when set, is called instead of Changed(false) when the verdict
	// turns unhealthy because the Stopping file appeared: the daemon still
	// serves its open connections while it stops.
	Stops func()
	// WriteFailed, when set, is called when writing a track file starts
	// failing (once, not at every probe).
	WriteFailed func(error)
}

// Run probes until ctx is cancelled. A track file that cannot be written is
// retried at the next probe; Run returns nil on cancellation.
func (p *Prober) Run(ctx context.Context) error {
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	watch := p.Watch
	if watch == 0 {
		watch = DefaultWatchInterval
	}
	tick := interval
	if watch > 0 && watch < interval {
		tick = watch
	}
	addr := hostPort(p.URL)
	rise, fall := max(p.Rise, 1), max(p.Fall, 1)
	client := p.Client
	if client == nil {
		client = &http.Client{Timeout: interval}
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	var ok, bad int
	var verdict *bool
	var healthySince time.Time
	failing := false
	var next time.Time // the next HTTP probe
	for {
		now := time.Now()
		var res probeResult
		stops := false
		switch {
		case p.stopping():
			// Ahead of the HTTP probe: the daemon still answers while it
			// says it stops, which must not count as a pass.
			res, stops = probeRefused, true
		case !now.Before(next):
			res = p.probe(ctx, client)
			next = now.Add(interval)
		case addr != "" && refused(ctx, addr, tick):
			res = probeRefused
		default:
			res = probeNone
		}
		if ctx.Err() != nil {
			// Stopping: a probe cut short is no verdict, and writing one
			// now could drop a VIP on the way out.
			return nil
		}
		switch res {
		case probeOK:
			ok, bad = ok+1, 0
		case probeFailed:
			ok, bad = 0, bad+1
		case probeRefused:
			ok, bad = 0, fall
			// The next probe confirms recovery on its own schedule.
			next = now.Add(interval)
		}
		var want *bool
		switch {
		case res == probeNone:
		case ok >= rise:
			v := true
			want = &v
		case bad >= fall:
			v := false
			want = &v
		}
		if want != nil {
			now := time.Now()
			switch {
			case !*want:
				healthySince = time.Time{}
			case healthySince.IsZero():
				healthySince = now
			}
			// Written every time it is due, not only on a change, so a file
			// someone removed or edited comes back.
			var errs []error
			for _, path := range p.Paths {
				open, known := true, true
				if p.Open != nil {
					open, known = p.Open(path, healthySince, now)
				}
				if *want && !known {
					continue
				}
				content := "1\n"
				if *want && open {
					content = "0\n"
				}
				if _, err := atomicfile.WriteIfChanged(path, []byte(content), 0o644); err != nil {
					errs = append(errs, err)
				}
			}
			err := errors.Join(errs...)
			switch {
			case err != nil:
				if !failing && p.WriteFailed != nil {
					p.WriteFailed(err)
				}
				failing = true
			case verdict == nil || *verdict != *want:
				failing = false
				verdict = want
				switch {
				case !*want && stops && p.Stops != nil:
					p.Stops()
				case p.Changed != nil:
					p.Changed(*want)
				}
			default:
				failing = false
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// HAProxyStopping is the file the haproxy pod creates in its run directory
// (beside the master socket) when kubelet stops it, before it stops
// listening: SIGTERM is haproxy's hard stop, and even its soft stop closes
// the listeners at once (haproxy 2.6 has no grace period), so the pod's
// wrapper announces the stop, waits for the VIPs to leave this node, and
// only then stops haproxy softly.
const HAProxyStopping = "stopping"

// stopping says whether the Stopping file exists.
func (p *Prober) stopping() bool {
	if p.Stopping == "" {
		return false
	}
	_, err := os.Stat(p.Stopping)
	return err == nil
}

type probeResult int

const (
	probeNone    probeResult = iota // a connect check that found the port open
	probeOK                         // the HTTP check passed
	probeFailed                     // the HTTP check failed: an error, a timeout, a bad status
	probeRefused                    // nothing listens: a definite failure
)

// hostPort is the host:port a health URL connects to ("" if it cannot be
// told, which turns the connect checks off).
func hostPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		default:
			return ""
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// refused connects to addr and reports whether the connection was refused.
// Anything else (success, a timeout) says nothing definite: the HTTP check
// with its hysteresis judges those.
func refused(ctx context.Context, addr string, timeout time.Duration) bool {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func (p *Prober) probe(ctx context.Context, c *http.Client) probeResult {
	return probe(ctx, c, p.URL)
}

// Passes runs one HTTP check of url as a Prober does: a 2xx answer passes.
func Passes(ctx context.Context, c *http.Client, url string) bool {
	return probe(ctx, c, url) == probeOK
}

func probe(ctx context.Context, c *http.Client, url string) probeResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return probeFailed
	}
	resp, err := c.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return probeRefused
		}
		return probeFailed
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return probeOK
	}
	return probeFailed
}
