package storetest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

// BenchCommit measures the commit path of an adapter as a raise uses it:
// each commit conditionally creates a ~1 KB item with a global index key and
// two lookup entries, from 2, 16 and 64 concurrent clients sharing group
// commits. It reports commits/s, the allocations (with -benchmem) and the
// process CPU time per commit, which depends far less than commits/s on
// what else the machine runs. open returns a fresh durable store.
func BenchCommit(b *testing.B, open func(b *testing.B) store.Store) {
	for _, p := range []int{1, 8, 32} {
		clients := p * runtime.GOMAXPROCS(0)
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s := open(b)
			data := []byte(`{"body":"` + strings.Repeat("x", 1000) + `"}`)
			var next atomic.Int64
			b.SetParallelism(p)
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					i := next.Add(1)
					id := fmt.Sprintf("%012d", i)
					it := store.Item{
						Key:  store.Key{PK: "A#bench", SK: "E#" + id},
						Type: "expectation",
						Index: map[store.IndexName]store.IndexKey{
							store.GSI5: {PK: fmt.Sprintf("OPEN#%d", i%16), SK: "2026-01-01T00:00:00Z#" + id},
						},
						Data: data,
					}
					writes := []store.Write{
						store.PutIfAbsent(it),
						store.PutIfAbsent(store.Item{Key: store.Key{PK: "FK#bench#" + id, SK: id}, Type: store.TypeLookupEntry, Data: []byte(`{}`)}),
						store.PutIfAbsent(store.Item{Key: store.Key{PK: "TK#bench#t", SK: id}, Type: store.TypeLookupEntry, Data: []byte(`{}`)}),
					}
					if err := s.Commit(ctx, writes); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
