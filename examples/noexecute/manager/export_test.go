package manager

// Remembered returns how many pods and nodes the manager keeps countdown
// state for, so that tests can check it is forgotten.
func (m *Manager) Remembered() (pods, nodes int) { return m.countdowns.sizes() }
