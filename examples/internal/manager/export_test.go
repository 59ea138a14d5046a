package manager

// Remembered returns how many pods and nodes the manager keeps countdown
// state for, so that tests can check it is forgotten.
func (m *Manager) Remembered() (pods, nodes int) {
	pods, _, nodes = m.countdowns.sizes()
	return pods, nodes
}

// RememberedFirstSights returns how many pods the manager remembers a first
// sight for (pods with no PodScheduled time and a countdown).
func (m *Manager) RememberedFirstSights() int {
	_, seen, _ := m.countdowns.sizes()
	return seen
}

// RemovedRecords returns how many removed pods the manager keeps a record of.
func (m *Manager) RemovedRecords() int {
	n := 0
	for i := range m.status.removed {
		st := &m.status.removed[i]
		st.mu.Lock()
		n += len(st.uids)
		st.mu.Unlock()
	}
	return n
}
