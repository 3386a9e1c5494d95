package lbconfig

import (
	"sync"
	"sync/atomic"

	"github.com/coredns/caddy"
)

// An lbconfig acts (takes the path lock, writes, reloads, feeds the BGP
// announcer) only once caddy has adopted the instance it belongs to.
//
// On a Corefile reload caddy builds the new instance and runs its OnStartup
// hooks (lbconfig's Start among them) while the old one still runs; a later
// step that fails (a plugin's OnStartup after lbconfig's, such as health
// on a busy address, or a server that cannot listen) discards the new
// instance: the old one's OnRestartFailed hooks run, the new one's
// OnShutdown never does. Only a success stops the old instance (its
// OnShutdown) and then emits InstanceStartupEvent for the new one, as
// caddy.Start does for the first. So:
//
//   - InstanceStartupEvent adopts the lbconfig of that instance, and stops
//     every other one of an older generation: those of a stopped instance
//     are gone already; what is left was discarded without a word (a
//     failed reload from a Corefile without lbconfig, whose old instance
//     had no lbconfig hook to tell).
//   - OnRestartFailed of the old instance stops the lbconfig of the
//     discarded one (any newer one not adopted) at once.
//
// Each Start takes a new generation; the path lock and the shared
// announcer refuse a generation older than one they already served, so a
// stale instance cannot act even if a hook above were missed.
var gens struct {
	sync.Mutex
	last uint64
	live map[*LBConfig]bool
}

// instanceKey is the caddy instance storage key of the instance's lbconfig
// (one per Corefile): how the startup event finds it.
type instanceKey struct{}

// begin gives l its generation and counts it live; an LBConfig not set up
// by caddy (tests, a library user) is adopted at once.
func (l *LBConfig) begin() {
	gens.Lock()
	defer gens.Unlock()
	gens.last++
	l.gen = gens.last
	l.adopted = make(chan struct{})
	if !l.inCaddy {
		close(l.adopted)
	}
	if gens.live == nil {
		gens.live = map[*LBConfig]bool{}
	}
	gens.live[l] = true
}

// end counts l as stopped.
func (l *LBConfig) end() {
	gens.Lock()
	delete(gens.live, l)
	gens.Unlock()
}

func (l *LBConfig) generation() uint64 {
	gens.Lock()
	defer gens.Unlock()
	return l.gen
}

func isAdopted(l *LBConfig) bool {
	select {
	case <-l.adopted:
		return true
	default:
		return false
	}
}

// adopt is what InstanceStartupEvent does: cur (nil when the adopted
// Corefile has no lbconfig) acts from now on, after every older instance
// caddy set up has stopped.
func adopt(cur *LBConfig) {
	gens.Lock()
	var stale []*LBConfig
	for l := range gens.live {
		if l != cur && l.inCaddy && (cur == nil || l.gen < cur.gen) {
			stale = append(stale, l)
		}
	}
	gens.Unlock()
	for _, l := range stale {
		log.Warningf("stopping the lbconfig of a Corefile that is not running (a failed reload)")
		l.Stop()
	}
	if cur != nil {
		gens.Lock()
		if gens.live[cur] && !isAdopted(cur) {
			close(cur.adopted)
		}
		gens.Unlock()
	}
}

// discardNewer is what old's OnRestartFailed does: the reload's new
// instance, set up and started, will never run.
func discardNewer(old *LBConfig) {
	gens.Lock()
	var discarded []*LBConfig
	for l := range gens.live {
		if l.inCaddy && l.gen > old.gen && !isAdopted(l) {
			discarded = append(discarded, l)
		}
	}
	gens.Unlock()
	for _, l := range discarded {
		log.Infof("Corefile reload failed: its lbconfig stops without having acted")
		l.Stop()
	}
}

// processStopping is set once caddy emits ShutdownEvent: a SIGTERM or
// SIGINT stops the process, before any instance's OnShutdown runs; a
// Corefile reload never emits it. A stopping lbconfig keeps its drain
// copies while keepalived releases (see lingerDrainer).
var processStopping atomic.Bool

// adoptHook is the caddy event hook behind adopt, and tells a process stop.
func adoptHook(ev caddy.EventName, info any) error {
	if ev == caddy.ShutdownEvent {
		processStopping.Store(true)
		return nil
	}
	inst, ok := info.(*caddy.Instance)
	if ev != caddy.InstanceStartupEvent || !ok {
		return nil
	}
	inst.StorageMu.RLock()
	cur, _ := inst.Storage[instanceKey{}].(*LBConfig)
	inst.StorageMu.RUnlock()
	adopt(cur)
	return nil
}

// registerAdoptHook registers adoptHook, once: caddy's SIGUSR1 reload
// clears every event hook before it sets up the new instance (and puts the
// old ones back if that fails), so each setup registers it again; the
// reload plugin's restarts clear nothing, and caddy panics on a second
// registration under one name.
func registerAdoptHook() {
	const dup = "hook named " + pluginName + " already registered"
	defer func() {
		if r := recover(); r != nil && r != dup {
			panic(r)
		}
	}()
	caddy.RegisterEventHook(pluginName, adoptHook)
}
