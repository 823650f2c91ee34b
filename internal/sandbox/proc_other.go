//go:build !unix

package sandbox

import (
	"errors"
	"syscall"
)

var errUnsupported = errors.New("sandbox: not supported on this platform")

func detachedAttr() *syscall.SysProcAttr        { return nil }
func rootUser() string                          { return "" }
func processAlive(pid int, dataDir string) bool { return false }
func signalTerm(pid int) error                  { return errUnsupported }
func signalKill(pid int) error                  { return errUnsupported }

func killGroup(pid int) error { return errUnsupported }
