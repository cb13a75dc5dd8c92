//go:build !unix

package benchkit

import "time"

// processCPU is 0 where this process's CPU time is not read.
func processCPU() time.Duration { return 0 }
