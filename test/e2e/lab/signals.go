package lab

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
)

// The signal registry: while a lab is open, SIGINT and SIGTERM tear every open
// lab down before the test binary exits, so Ctrl-C leaves nothing behind.
var registry struct {
	sync.Mutex
	labs map[*Lab]struct{}
	ch   chan os.Signal
}

func register(l *Lab) {
	registry.Lock()
	defer registry.Unlock()
	if registry.labs == nil {
		registry.labs = map[*Lab]struct{}{}
		registry.ch = make(chan os.Signal, 1)
		go onSignal(registry.ch)
	}
	if len(registry.labs) == 0 {
		notifySignals(registry.ch)
	}
	registry.labs[l] = struct{}{}
}

func unregister(l *Lab) {
	registry.Lock()
	defer registry.Unlock()
	delete(registry.labs, l)
	last := true
	for o := range registry.labs {
		if o.owner == l.owner {
			last = false
		}
	}
	if last {
		_ = os.Remove(filepath.Join(markerDir, l.owner))
	}
	if len(registry.labs) == 0 {
		// Restore the default behaviour of SIGINT/SIGTERM.
		signal.Stop(registry.ch)
	}
}

func notifySignals(ch chan os.Signal) { signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM) }

func onSignal(ch chan os.Signal) {
	for sig := range ch {
		registry.Lock()
		labs := make([]*Lab, 0, len(registry.labs))
		for l := range registry.labs {
			labs = append(labs, l)
		}
		registry.Unlock()
		fmt.Fprintf(os.Stderr, "lab: got %v, tearing down %d lab(s)\n", sig, len(labs))
		for _, l := range labs {
			if err := l.Close(); err != nil {
				fmt.Fprintf(os.Stderr, "lab: teardown of %s: %v\n", l.prefix, err)
			}
		}
		code := 1
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		os.Exit(code)
	}
}
