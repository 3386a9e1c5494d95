package lbconfig

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/infradns/infradns/internal/lb"
)

// frozenBackends takes the apiservers of a peer found paused out of this
// node's haproxy at once. A paused node's kernel still completes TCP
// handshakes for its frozen apiserver, so haproxy's own checks need two
// failed TLS handshakes to see it (0.7-1.2 s after the pause began), and
// until then the node that took the API VIP over sends a share of its new
// connections there, where they hang for as long as the pause (lab: a
// request 0.3 s after the takeover failed in 5 of 6 rounds). lbconfig knows
// sooner: its holder boost probes the holder it replaced as soon as it takes
// over, and a connection accepted and never answered is a paused node about
// 250 ms later. Only taken down, never kept down: haproxy's checks go on and
// bring the server back after two passes once the node answers.
type frozenBackends struct {
	worker func(ctx context.Context, cmd string) error

	mu sync.Mutex
	// done is, per peer, the takeover whose probe last took its servers down.
	done map[netip.Addr]time.Time
}

// newFrozenBackends is nil when haproxy is not reloaded through its master
// socket: no runtime path to its worker.
func newFrozenBackends(r reloadSpec) *frozenBackends {
	if r.method != "socket" {
		return nil
	}
	return &frozenBackends{worker: lb.MasterSocket{Path: r.path}.Worker, done: map[netip.Addr]time.Time{}}
}

// peerDead takes peer's servers in h down, once per takeover (since): they
// cannot pass a check while the node is paused, so one command is enough.
func (f *frozenBackends) peerDead(ctx context.Context, h lb.HAProxy, peer netip.Addr, since time.Time) {
	if f == nil {
		return
	}
	servers := lb.ServersAt(h, peer)
	if len(servers) == 0 {
		return
	}
	f.mu.Lock()
	if f.done[peer].Equal(since) {
		f.mu.Unlock()
		return
	}
	f.done[peer] = since
	f.mu.Unlock()
	go func() {
		for _, s := range servers {
			cmd, err := lb.ServerDownCommand(h.Name, s)
			if err == nil {
				err = f.worker(ctx, cmd)
			}
			if err != nil {
				frozenServersDown.WithLabelValues("failed").Inc()
				log.Warningf("%v does not answer (a paused node), and its apiserver %s could not be taken out of haproxy: %v; haproxy's checks will", peer, s, err)
				continue
			}
			frozenServersDown.WithLabelValues("down").Inc()
			log.Infof("%v accepts connections and does not answer (a paused node): its apiserver %s is out of haproxy now, until haproxy's checks pass again", peer, s)
		}
	}()
}
