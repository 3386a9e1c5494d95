package lbconfig

// Ready implements the ready plugin's interface: true once the informers
// have their first full listing, or, with static backends and no API, once
// the files have been written.
func (l *LBConfig) Ready() bool {
	if w := l.watcher.Load(); w != nil && w.HasSynced() {
		return true
	}
	return l.applied.Load()
}
