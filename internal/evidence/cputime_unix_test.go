//go:build unix

package evidence_test

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) this process has used, so
// that a benchmark on a shared machine can report its own work apart from
// the time it waited for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
