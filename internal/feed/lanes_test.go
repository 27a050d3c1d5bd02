package feed_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// laneRecorder records the versions each item's changes arrive with, and
// holds the first change of item "slow" until a change of another item has
// been handled meanwhile.
type laneRecorder struct {
	mu       sync.Mutex
	seen     map[string][]int64
	other    chan struct{}
	once     sync.Once
	overlaps bool
}

func (r *laneRecorder) Handle(_ context.Context, ch store.Change) error {
	if ch.Key.PK == "slow" && ch.New.Version == 1 {
		select {
		case <-r.other:
			r.mu.Lock()
			r.overlaps = true
			r.mu.Unlock()
		case <-time.After(5 * time.Second):
		}
	} else if ch.Key.PK != "slow" {
		r.once.Do(func() { close(r.other) })
	}
	r.mu.Lock()
	r.seen[ch.Key.PK] = append(r.seen[ch.Key.PK], ch.New.Version)
	r.mu.Unlock()
	return nil
}

// TestLanesKeepEachItemsOrder: with Lanes, one item's slow change does not
// hold up another item's, each item's changes still arrive in commit
// order, and the feed is acknowledged only once all are handled.
func TestLanesKeepEachItemsOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys := []string{"slow"}
	for i := range 20 {
		keys = append(keys, fmt.Sprintf("item-%d", i))
	}
	const versions = 5
	for v := 1; v <= versions; v++ {
		for _, k := range keys {
			err := store.Update(ctx, st, func(tx *store.Tx) error {
				key := store.Key{PK: k, SK: "X"}
				it, _, err := tx.Get(ctx, key)
				if err != nil {
					return err
				}
				it.Key, it.Type, it.Data = key, "thing", []byte(`{}`)
				tx.Put(it)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	r := &laneRecorder{seen: map[string][]int64{}, other: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = feed.RunWith(ctx, st, r, slog.New(slog.DiscardHandler), feed.Options{Lanes: 4})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, err := st.ReadFeed(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the feed was not acknowledged")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.overlaps {
		t.Error("another item's change waited for the slow one")
	}
	for _, k := range keys {
		got := r.seen[k]
		if len(got) != versions {
			t.Fatalf("%s: handled %v", k, got)
		}
		for i, v := range got {
			if v != int64(i+1) {
				t.Fatalf("%s: versions out of order: %v", k, got)
			}
		}
	}
}
