//go:build unix

package launch

import (
	"errors"
	"os/exec"
	"syscall"
)

// processExists reports whether a process with this pid exists (EPERM means
// it does, owned by someone else).
func processExists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// newWatchdogCmd runs exe in a process group of its own, so that a Ctrl-C
// or a signal to the test's group does not end the watchdog before its work.
func newWatchdogCmd(exe string) *exec.Cmd {
	cmd := exec.Command(exe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}
