package bolt

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

func BenchmarkScratchDelay(b *testing.B) {
	for _, d := range []time.Duration{time.Nanosecond, 200 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond} {
		for _, p := range []int{1, 32} {
			b.Run(fmt.Sprintf("delay=%v/p=%d", d, p), func(b *testing.B) {
				dir, _ := os.MkdirTemp("/work", "bench")
				defer os.RemoveAll(dir)
				s := openTest(b, filepath.Join(dir, "store.db"), Options{MaxBatchDelay: d})
				data := []byte(`{"body":"` + strings.Repeat("x", 1000) + `"}`)
				var next atomic.Int64
				b.SetParallelism(p)
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := next.Add(1)
						it := store.Item{Key: store.Key{PK: fmt.Sprintf("exp#%012d", i), SK: "exp"}, Type: "e", Data: data}
						if err := s.Commit(context.Background(), []store.Write{store.PutIfAbsent(it)}); err != nil {
							b.Error(err)
							return
						}
					}
				})
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			})
		}
	}
}
