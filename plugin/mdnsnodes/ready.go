package mdnsnodes

// Ready implements the ready plugin's interface: true once either source has
// delivered its first full view: the listener has sent its first query and
// waited one query window for the answers, or the API's first Node list is
// served.
func (m *MDNSNodes) Ready() bool {
	if m.forceReady || m.apiSynced.Load() {
		return true
	}
	b := m.browser.Load()
	return b != nil && b.Ready()
}
