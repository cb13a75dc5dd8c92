//go:build unix

package benchkit

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used; 0 where
// it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
