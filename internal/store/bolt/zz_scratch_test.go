package bolt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

type policy struct {
	name     string
	attempts int
	backoff  func(attempt int) time.Duration
}

func upd(ctx context.Context, s store.Store, p policy, k store.Key) (int, error) {
	var err error
	for attempt := 0; attempt < p.attempts; attempt++ {
		it, gerr := s.Get(ctx, k)
		w := store.PutIfVersion(store.Item{Key: k, Data: []byte("x")}, it.Version)
		if errors.Is(gerr, store.ErrNotFound) {
			w = store.PutIfAbsent(store.Item{Key: k, Data: []byte("x")})
		}
		err = s.Commit(ctx, []store.Write{w})
		if !errors.Is(err, store.ErrConflict) || attempt == p.attempts-1 {
			return attempt, err
		}
		time.Sleep(p.backoff(attempt))
	}
	return p.attempts, err
}

func TestScratchCounter(t *testing.T) {
	orig := func(attempt int) time.Duration {
		b := time.Duration(1<<min(attempt, 6)) * time.Millisecond
		return b + time.Duration(rand.Int64N(int64(b)))
	}
	capped := func(c int) func(int) time.Duration {
		return func(attempt int) time.Duration {
			b := time.Duration(1<<min(attempt, c)) * time.Millisecond
			return b + time.Duration(rand.Int64N(int64(b)))
		}
	}
	full := func(attempt int) time.Duration {
		b := time.Duration(1<<min(attempt, 5)) * time.Millisecond
		return time.Duration(rand.Int64N(int64(b)))
	}
	pols := []policy{{"orig12", 12, orig}, {"orig32", 32, orig}, {"cap16x32", 32, capped(4)}, {"full32", 32, full}}
	for _, p := range pols {
		maxAtt := 0
		fails := 0
		var total time.Duration
		for rep := 0; rep < 6; rep++ {
			s := openTest(t, filepath.Join(t.TempDir(), "s.db"), Options{MaxBatchDelay: time.Millisecond})
			k := store.Key{PK: "c", SK: "c"}
			var wg sync.WaitGroup
			var mu sync.Mutex
			var f atomic.Int64
			start := time.Now()
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50 {
						a, err := upd(context.Background(), s, p, k)
						mu.Lock()
						maxAtt = max(maxAtt, a)
						mu.Unlock()
						if err != nil {
							f.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			total += time.Since(start)
			fails += int(f.Load())
		}
		t.Log(fmt.Sprintf("%s: avg %v, max attempt %d, failed %d", p.name, total/6, maxAtt, fails))
	}
}
