package lb

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"github.com/infradns/infradns/internal/atomicfile"
)

// TrackPath is the track file of a VIP kind ("api", "ingress"), the one the
// keepalived template names.
func TrackPath(c Config, kind string) string {
	return filepath.Join(c.TrackDir, c.Cluster+"-"+kind+".health")
}

// Default health targets: haproxy's monitor-uri for the API VIP (it fails
// once no apiserver is up, so a node whose load balancer works keeps the
// VIP even while its own apiserver restarts), and the router's readiness
// on its stats port for the ingress VIP, as OpenShift's scripts check.
const (
	DefaultIngressHealthURL = "http://127.0.0.1:1936/healthz/ready"
	DefaultProbeInterval    = 500 * time.Millisecond
)

// APIHealthURL is haproxy's monitor-uri on this node.
func APIHealthURL(c Config) string {
	return fmt.Sprintf("http://127.0.0.1:%d/haproxy_ready", c.HealthPort)
}

// Prober keeps a keepalived track file in step with an HTTP health check:
// "0" after Rise successes in a row, "1" after Fall failures in a row, so
// one lost probe does not move a VIP. Until the first verdict the file is
// left alone (keepalived creates it as 1: unhealthy).
type Prober struct {
	URL      string
	Path     string
	Interval time.Duration
	Rise     int
	Fall     int
	// Client makes the requests; nil means one with a timeout of Interval.
	Client *http.Client
	// Changed, when set, is called with each new verdict.
	Changed func(healthy bool)
	// WriteFailed, when set, is called when writing the track file starts
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
			content := "1\n"
			if *want {
				content = "0\n"
			}
			// Written every time it is due, not only on a change, so a file
			// someone removed or edited comes back.
			_, err := atomicfile.WriteIfChanged(p.Path, []byte(content), 0o644)
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
