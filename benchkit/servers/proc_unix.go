//go:build unix

package servers

import "syscall"

// processExists reports whether a process with this id exists.
func processExists(pid int) bool { return syscall.Kill(pid, 0) != syscall.ESRCH }
