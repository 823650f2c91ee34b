//go:build unix

package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// detachedAttr puts mariadbd in its own process group, so that a terminal's
// SIGINT does not reach it and it outlives the caller.
func detachedAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// rootUser returns the name to pass as --user when running as root (mariadbd
// refuses to run as root without it), or "" otherwise.
func rootUser() string {
	if os.Geteuid() != 0 {
		return ""
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "root"
}

// processAlive reports whether pid is a live (not zombie) process and, where
// /proc is available, whether it is the mariadbd serving dataDir, so that a
// recycled pid is never taken for ours.
func processAlive(pid int, dataDir string) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		return true // no procfs: trust the signal check
	}
	p := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(p + "/stat")
	if err != nil {
		return false
	}
	// "pid (comm) S ...": the state follows the last ')'.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && (stat[i+2] == 'Z' || stat[i+2] == 'X') {
		return false
	}
	cmdline, err := os.ReadFile(p + "/cmdline")
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(cmdline, []byte{0}) {
		if string(arg) == "--datadir="+dataDir {
			return true
		}
	}
	return false
}

func signalTerm(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }
func signalKill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// errUnsupported is non-nil where sandboxes cannot run.
var errUnsupported error

// killGroup SIGKILLs the process group led by pid.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
