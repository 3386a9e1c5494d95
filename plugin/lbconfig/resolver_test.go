package lbconfig

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitResolver: the API VIP's start waits for the resolver's first 2xx,
// not for ever (limit), and not past the lbconfig instance's end (ctx).
func TestWaitResolver(t *testing.T) {
	var ready atomic.Bool
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()

	tests := []struct {
		name    string
		readyIn time.Duration // -1: never
		limit   time.Duration
		cancel  time.Duration // 0: never
		// returns within [min, max) of the start
		min, max time.Duration
	}{
		{"ready at once", 0, time.Minute, 0, 0, 10 * time.Second},
		{"ready later", 400 * time.Millisecond, time.Minute, 0, 400 * time.Millisecond, 10 * time.Second},
		{"never ready: the limit", -1, 500 * time.Millisecond, 0, 500 * time.Millisecond, 10 * time.Second},
		{"never ready: the instance stops", -1, time.Minute, 300 * time.Millisecond, 300 * time.Millisecond, 10 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ready.Store(tc.readyIn == 0)
			asked.Store(0)
			if tc.readyIn > 0 {
				timer := time.AfterFunc(tc.readyIn, func() { ready.Store(true) })
				defer timer.Stop()
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel > 0 {
				timer := time.AfterFunc(tc.cancel, cancel)
				defer timer.Stop()
			}
			start := time.Now()
			waitResolver(ctx, srv.URL+"/ready", tc.limit)
			took := time.Since(start)
			if took < tc.min || took >= tc.max {
				t.Errorf("returned after %v, want within [%v, %v)", took, tc.min, tc.max)
			}
			if tc.readyIn == 0 && asked.Load() != 1 {
				t.Errorf("asked %d times, want once", asked.Load())
			}
			if tc.readyIn > 0 && asked.Load() < 2 {
				t.Errorf("asked %d times, want until it answered 2xx", asked.Load())
			}
		})
	}
}
