package testenv

import "syscall"

// sysProcAttr makes the kernel kill the servers when the test binary dies
// without calling Stop (a panic, a -timeout, a kill), so no orphan keeps the
// ports and megabytes.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
