package manager

// Remembered returns how many pods and nodes the manager's countdowns
// remember something of, so that tests can check it is forgotten.
func (m *Manager) Remembered() (pods, nodes int) { return m.countdowns.Len() }

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
