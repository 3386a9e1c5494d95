package kube

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

type stubClient struct{ Client }

// TestWaitClient: a configuration that appears after a few tries is used,
// the warning is not repeated for the same reason, and cancellation ends
// the wait with no client.
func TestWaitClient(t *testing.T) {
	defer func(d time.Duration) { firstRetry = d }(firstRetry)
	firstRetry = time.Millisecond
	for _, tc := range []struct {
		name     string
		results  []error // one per try before the client; nil: nothing configured
		warnings int
	}{
		{"at once", nil, 0},
		{"nothing configured, then a file", []error{nil, nil}, 1},
		{"missing file twice, then present", []error{errors.New("no such file"), errors.New("no such file")}, 1},
		{"two reasons", []error{nil, errors.New("no such file"), errors.New("bad certificate")}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			var warnings []string
			c := WaitClient(context.Background(), func() (Client, error) {
				tries++
				if tries <= len(tc.results) {
					return nil, tc.results[tries-1]
				}
				return stubClient{}, nil
			}, func(format string, args ...any) { warnings = append(warnings, fmt.Sprintf(format, args...)) })
			if c == nil || tries != len(tc.results)+1 {
				t.Fatalf("client %v after %d tries", c, tries)
			}
			if len(warnings) != tc.warnings {
				t.Errorf("warnings %q, want %d", warnings, tc.warnings)
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if c := WaitClient(ctx, func() (Client, error) { return nil, errors.New("down") }, func(string, ...any) {}); c != nil {
		t.Error("a client after cancellation")
	}
}
