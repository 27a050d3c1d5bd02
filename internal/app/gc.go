package app

import (
	"os"
	"runtime/debug"
)

// Garbage-collector settings of the embedded server (TuneGC).
const (
	// GCPercent is the GOGC the embedded server runs with: its live heap is
	// small (tens of MB, the clock's window and caches) and its allocation
	// rate high (JSON in and out of every request), so at Go's default of
	// 100 the collector took about a sixth of the CPU under load; at 400 it
	// runs a quarter as often, for a heap of a few hundred MB at most.
	GCPercent = 400
	// GCMemoryLimit is the soft limit on the Go heap that makes the
	// collector run more often again as the heap nears it, so the higher
	// GCPercent cannot let a large live heap (a long catch-up, a bulk
	// listing) grow fivefold.
	GCMemoryLimit = 1 << 30
)

// TuneGC applies GCPercent and GCMemoryLimit to this process, each unless
// the operator set its environment variable (GOGC, GOMEMLIMIT), which then
// wins. Mains that serve the embedded store call it once at start.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(GCMemoryLimit)
	}
}
