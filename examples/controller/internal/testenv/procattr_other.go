//go:build !linux

package testenv

import "syscall"

// sysProcAttr has no parent-death signal to ask for outside Linux; Stop
// remains the only way the servers end.
func sysProcAttr() *syscall.SysProcAttr { return nil }
