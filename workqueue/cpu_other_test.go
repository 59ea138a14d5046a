//go:build !unix

package workqueue_test

import "time"

// cpuTime returns 0: the CPU time per add is measured on Unix only.
func cpuTime() time.Duration { return 0 }
