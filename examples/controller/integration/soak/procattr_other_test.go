//go:build !linux

package soak_test

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
