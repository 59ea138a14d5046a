package soak_test

import "syscall"

// sysProcAttr has the kernel kill a replica if the test process dies, so
// that none is left acting on a server that has gone.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
