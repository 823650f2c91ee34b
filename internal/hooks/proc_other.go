//go:build !unix

package hooks

import "os/exec"

func setGroup(*exec.Cmd) {}

// killGroup kills the hook itself (no process groups here).
func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return cmd.Process.Kill()
}
