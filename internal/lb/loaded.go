package lb

import (
	"crypto/sha256"
	"errors"
	"sync"
)

// Loaded remembers, per output file, the bytes its daemon was last
// told to load, with success. What a daemon runs cannot be asked: keepalived
// has no query, and haproxy 2.6's master CLI no configuration hash. So a
// daemon is reloaded when the file changed or when it is not known to run
// these bytes, and nothing is known at the start of a process: a process
// that wrote a file and died before the reload signal was delivered (or
// whose reload failed) leaves the next one identical bytes on disk and a
// daemon still running the old file, which a memory of "written, not yet
// reloaded" in the dead process cannot tell. A reload of the same bytes is
// harmless (keepalived keeps its VRRP states, haproxy hands over to a new
// worker).
//
// One Loaded outlives a Controller: lbconfig shares one across Corefile
// reloads, so a reload of CoreDNS does not reload the daemons again, and
// what the previous instance wrote and failed to reload is reloaded by the
// next. The zero value is ready to use.
type Loaded struct {
	mu sync.Mutex
	m  map[string]loadState
}

// loadState is what a daemon was last told to load (sum) and whether it
// took it; no entry: nothing told yet by this process.
type loadState struct {
	sum [sha256.Size]byte
	ok  bool
}

// loadedKey: one daemon reads one file (the reload options are checked to
// name each daemon once).
func loadedKey(o Output) string { return o.Path }

// needs says whether o's daemon must be told to load data: the file was
// just replaced (changed), or it is not known to run these bytes.
func (l *Loaded) needs(o Output, data []byte, changed bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, known := l.m[loadedKey(o)]
	return changed || !known || !st.ok || st.sum != sha256.Sum256(data)
}

// reloaded records the outcome of telling o's daemon to load data; it says
// whether the daemon now runs data (the reload needs no retry).
//
// A daemon that is not running while nothing is known yet and the file was
// not replaced by this process reads these very bytes when it starts: that
// is no reason to retry (lbconfig starting at boot before keepalived would
// otherwise hold its first success until keepalived runs). After a write,
// not running is retried as before: the daemon may have read the old file
// an instant before and not opened its socket yet.
func (l *Loaded) reloaded(o Output, data []byte, changed bool, err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]loadState{}
	}
	key := loadedKey(o)
	_, known := l.m[key]
	ok := err == nil || (errors.Is(err, ErrNotRunning) && !changed && !known)
	// Not ok: known from now on, so a retry reloads even with equal bytes.
	l.m[key] = loadState{sum: sha256.Sum256(data), ok: ok}
	return ok
}
