package bolt

// Benchmarks of the embedded store: commits, index queries and feed
// acknowledgements.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/storetest"
	"go.etcd.io/bbolt"
)

// BenchmarkCommitParallel measures durable single-item conditional creates
// of ~1 KB items from concurrent clients sharing group commits.
func BenchmarkCommitParallel(b *testing.B) {
	for _, p := range []int{1, 8, 32} {
		clients := p * runtime.GOMAXPROCS(0)
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			s := openTest(b, filepath.Join(b.TempDir(), "store.db"), Options{})
			data := []byte(`{"body":"` + strings.Repeat("x", 1000) + `"}`)
			var next atomic.Int64
			tx0 := lastTxID(b, s)
			b.SetParallelism(p)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					i := next.Add(1)
					it := store.Item{
						Key:  store.Key{PK: fmt.Sprintf("exp#%012d", i), SK: "exp"},
						Type: "expectation",
						Index: map[store.IndexName]store.IndexKey{
							store.GSI1: {PK: fmt.Sprintf("due#%03d", i%100), SK: fmt.Sprintf("2026-01-01T00:00:%012d", i)},
						},
						Data: data,
					}
					if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(it)}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
			b.ReportMetric(float64(b.N)/float64(max(1, lastTxID(b, s)-tx0)), "commits/tx")
		})
	}
}

// lastTxID returns the id of the last committed write transaction.
func lastTxID(b *testing.B, s *Store) int {
	tx, err := s.db.Begin(false)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	return tx.ID()
}

// benchDB returns the path of a cached database holding n items in other
// partitions and 100 items in GSI1 partition queryPartition, building it
// once under os.TempDir.
func benchDB(b *testing.B, n int) string {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("clockwork-bolt-bench-queryindex-%d.db", n))
	marker := store.Key{PK: "bench#meta", SK: "complete"}
	if _, err := os.Stat(path); err == nil {
		if s, err := Open(path, Options{Timeout: time.Second}); err == nil {
			_, err := s.Get(context.Background(), marker)
			_ = s.Close()
			if err == nil {
				return path
			}
		}
	}
	b.Logf("building %s (%d items); later runs reuse it", path, n)
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	s, err := Open(tmp, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	data := []byte(`{"body":"` + strings.Repeat("x", 200) + `"}`)
	mk := func(pk, gpk, gsk string) store.Write {
		return store.PutIfAbsent(store.Item{
			Key: store.Key{PK: pk, SK: "item"}, Type: "bench",
			Index: map[store.IndexName]store.IndexKey{store.GSI1: {PK: gpk, SK: gsk}},
			Data:  data,
		})
	}
	const perTx = 50_000
	for start := 0; start < n; start += perTx {
		err := s.db.Update(func(tx *bbolt.Tx) error {
			tx.Bucket(bucketItems).FillPercent = 0.9
			tx.Bucket(bucketIndex[0]).FillPercent = 0.9
			var writes []store.Write
			for i := start; i < min(start+perTx, n); i++ {
				writes = append(writes, mk(fmt.Sprintf("bench#%07d", i), fmt.Sprintf("grp#%06d", i/10), fmt.Sprintf("t#%07d", i)))
				if len(writes) == store.MaxCommitWrites {
					if err := applyWrites(tx, writes); err != nil {
						return err
					}
					writes = writes[:0]
				}
			}
			return applyWrites(tx, writes)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var writes []store.Write
	for i := range 100 {
		writes = append(writes, mk(fmt.Sprintf("target#%03d", i), queryPartition, fmt.Sprintf("t#%03d", i)))
	}
	mustCommit(b, s, writes...)
	mustCommit(b, s, store.PutIfAbsent(store.Item{Key: marker, Type: "bench"}))
	if err := s.db.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	return path
}

func applyWrites(tx *bbolt.Tx, writes []store.Write) error {
	if len(writes) == 0 {
		return nil
	}
	ops, err := prepare(writes)
	if err != nil {
		return err
	}
	_, err = apply(tx, ops, false)
	return err
}

// BenchmarkQueryIndex measures a GSI1 query returning one partition of 100
// items from a database holding 1,000,000 items in other partitions (100,000
// with -short).
func BenchmarkQueryIndex(b *testing.B) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	path := benchDB(b, n)
	s := openTest(b, path, Options{Timeout: time.Second})
	ctx := context.Background()
	q := store.Query{Index: store.GSI1, PK: queryPartition, Limit: 100}
	check := func(page store.Page, err error) bool {
		if err != nil || len(page.Items) != 100 || page.Items[0].Index[store.GSI1].PK != queryPartition {
			b.Errorf("Query = %d items, %v", len(page.Items), err)
			return false
		}
		return true
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !check(s.Query(ctx, q)) {
				return
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !check(s.Query(ctx, q)) {
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
	})
}

// BenchmarkCommit is the adapters' shared commit benchmark (storetest.BenchCommit):
// go test -run '^$' -bench '^BenchmarkCommit$' -benchmem ./internal/store/bolt
func BenchmarkCommit(b *testing.B) {
	storetest.BenchCommit(b, func(b *testing.B) store.Store { return openTest(b, filepath.Join(b.TempDir(), "store.db"), Options{}) })
}

// BenchmarkAckFeed acknowledges a backlog of 5,000 changes in one call, as
// the feed does after falling behind a bulk load.
func BenchmarkAckFeed(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, filepath.Join(b.TempDir(), "ack.db"), Options{NoSync: true})
	n := 0
	for b.Loop() {
		b.StopTimer()
		var writes []store.Write
		for range 5000 {
			n++
			writes = append(writes, store.PutIfAbsent(store.Item{Key: store.Key{PK: "p", SK: fmt.Sprintf("%09d", n)}, Type: "t", Data: []byte(`{}`)}))
			if len(writes) == 100 {
				if err := s.Commit(ctx, writes); err != nil {
					b.Fatal(err)
				}
				writes = nil
			}
		}
		changes, err := s.ReadFeed(ctx, 10000)
		if err != nil || len(changes) != 5000 {
			b.Fatalf("ReadFeed = %d, %v", len(changes), err)
		}
		b.StartTimer()
		if err := s.AckFeed(ctx, changes[len(changes)-1].Seq); err != nil {
			b.Fatal(err)
		}
	}
}
