package lb

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
)

// DefaultProbeInterval is how often a health check runs.
const DefaultProbeInterval = 500 * time.Millisecond

// Prober keeps keepalived track files in step with an HTTP health check:
// "0" after Rise successes in a row, "1" after Fall failures in a row, so
// one lost probe does not move a VIP. Until the first verdict the files are
// left alone (keepalived creates them as 1: unhealthy).
type Prober struct {
	URL string
	// Paths are the track files of the groups this check gates.
	Paths    []string
	Interval time.Duration
	Rise     int
	Fall     int
	// Open, when set, may hold a healthy file at 1 a while longer (a group
	// waiting for the node it prefers; see ClaimGate), given the time the
	// check last became healthy. known false leaves a healthy file alone.
	Open func(path string, healthySince, now time.Time) (open, known bool)
	// Client makes the requests; nil means one with a timeout of Interval.
	Client *http.Client
	// Changed, when set, is called with each new verdict.
	Changed func(healthy bool)
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
	rise, fall := max(p.Rise, 1), max(p.Fall, 1)
	client := p.Client
	if client == nil {
		client = &http.Client{Timeout: interval}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var ok, bad int
	var verdict *bool
	var healthySince time.Time
	failing := false
	for {
		if p.probe(ctx, client) {
			ok, bad = ok+1, 0
		} else {
			ok, bad = 0, bad+1
		}
		var want *bool
		switch {
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
				if p.Changed != nil {
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

func (p *Prober) probe(ctx context.Context, c *http.Client) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}
