package mdnsnodes

// Ready implements the ready plugin's interface: true once the listener has
// sent its first query and waited one query window for the answers.
func (m *MDNSNodes) Ready() bool {
	if m.forceReady {
		return true
	}
	b := m.browser.Load()
	return b != nil && b.Ready()
}
