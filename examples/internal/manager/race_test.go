//go:build race

package manager_test

// raceEnabled reports whether the race detector is on: it slows the
// million-pod test tenfold, so that runs a tenth of it.
const raceEnabled = true
