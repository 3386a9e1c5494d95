package kube

import (
	"context"
	"errors"
	"time"
)

// ClientRetryMax bounds the wait between two looks for API access. A
// kubeconfig often arrives after CoreDNS starts (kubeadm writes it during
// init, a bootstrap node gets it last); looking for a local file costs
// nothing, so a late one is picked up within this time.
const ClientRetryMax = 5 * time.Second

// firstRetry is the first wait; tests shorten it.
var firstRetry = time.Second

// WaitClient calls build until it returns a client (1 s doubling to
// ClientRetryMax between tries) or ctx ends (nil). A nil client without an
// error means no configuration was found. warn hears about the failure at
// the first try, whenever the reason changes, and once a minute, not at
// every try.
func WaitClient(ctx context.Context, build func() (Client, error), warn func(format string, args ...any)) Client {
	delay := firstRetry
	var lastMsg string
	var logged time.Time
	for {
		c, err := build()
		if err == nil && c != nil {
			return c
		}
		if err == nil {
			err = errors.New("no configuration found")
		}
		if msg := err.Error(); msg != lastMsg || time.Since(logged) >= time.Minute {
			warn("kubernetes client: %v (retrying every %s at most)", err, ClientRetryMax)
			lastMsg, logged = msg, time.Now()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
		delay = min(2*delay, ClientRetryMax)
	}
}
