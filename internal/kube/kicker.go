package kube

import (
	"context"
	"time"
)

// kicker folds the change notices of a store into calls of a handler:
// one kick pending at most, so a burst of changes costs one call.
type kicker chan struct{}

func newKicker() kicker { return make(kicker, 1) }

// kick notes a change; it never blocks.
func (k kicker) kick() {
	select {
	case k <- struct{}{}:
	default:
	}
}

// loop calls f after each kick until ctx ends. Once debounce says so (after
// the first listing), it waits d first and folds the kicks of that time
// into the same call.
func (k kicker) loop(ctx context.Context, d time.Duration, debounce func() bool, f func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-k:
		}
		if debounce() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
			select {
			case <-k: // folded into this call
			default:
			}
		}
		f()
	}
}
