package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

// testExpiry checks store.Item.ExpiresAt: an expired item is absent to
// Get, Query (table and index) and a conditional create, and an IfVersion
// write or Check of it conflicts, while a live one round-trips its
// ExpiresAt. Expired items are written with an ExpiresAt in the past, so
// nothing waits for a clock.
func testExpiry(t *testing.T, s store.Store, ns string) {
	ctx := ctxT(t)
	past, future := time.Now().Add(-time.Minute).Unix(), time.Now().Add(time.Hour).Unix()
	pk := ns + "p"
	gone := item(pk, "a", `{"n":1}`)
	gone.ExpiresAt = past
	gone.Index = map[store.IndexName]store.IndexKey{store.GSI1: {PK: ns + "ix", SK: "1"}}
	live := item(pk, "b", `{"n":2}`)
	live.ExpiresAt = future
	live.Index = map[store.IndexName]store.IndexKey{store.GSI1: {PK: ns + "ix", SK: "2"}}
	forever := item(pk, "c", `{"n":3}`)
	commit(t, s, store.PutIfAbsent(gone), store.PutIfAbsent(live), store.PutIfAbsent(forever))

	mustAbsent(t, s, gone.Key)
	if got := mustGet(t, s, live.Key); got.ExpiresAt != future {
		t.Fatalf("ExpiresAt = %d, want %d", got.ExpiresAt, future)
	}
	if got := mustGet(t, s, forever.Key); got.ExpiresAt != 0 {
		t.Fatalf("ExpiresAt = %d, want 0", got.ExpiresAt)
	}
	keys := func(q store.Query) []string {
		t.Helper()
		var out []string
		for {
			p, err := s.Query(ctx, q)
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			for _, it := range p.Items {
				out = append(out, it.SK)
			}
			if p.Next == "" {
				return out
			}
			q.After = p.Next
		}
	}
	if got := keys(store.Query{PK: pk, Limit: 1}); len(got) != 2 || got[0] != "b" || got[1] != "c" {
		t.Fatalf("table query = %v, want [b c]", got)
	}
	eventually(t, func() bool {
		got := keys(store.Query{Index: store.GSI1, PK: ns + "ix"})
		return len(got) == 1 && got[0] == "b"
	})

	// Compare-and-set on the expired version, and a check of it, conflict.
	again := item(pk, "a", `{"n":4}`)
	err := s.Commit(ctx, []store.Write{store.PutIfVersion(again, 1)})
	wantConflict(t, err, 0, again.Key)
	err = s.Commit(ctx, []store.Write{{Check: &again.Key, Cond: store.Cond{Kind: store.IfVersion, Version: 1}}, store.PutIfAbsent(item(pk, "d", `{}`))})
	wantConflict(t, err, 0, again.Key)
	// A conditional create over it succeeds and starts at version 1.
	commit(t, s, store.PutIfAbsent(again))
	if got := mustGet(t, s, again.Key); got.Version != 1 || string(got.Data) != `{"n":4}` || got.ExpiresAt != 0 {
		t.Fatalf("created over the expired item: %+v", got)
	}

	// Update: an item read as expired is created; its lookup entries
	// carry its ExpiresAt, and are written again when only that changes.
	lk := store.Key{PK: ns + "lk", SK: "x"}
	put := func(expires int64) {
		t.Helper()
		err := store.Update(ctx, s, func(tx *store.Tx) error {
			it, _, err := tx.Get(ctx, lk)
			if err != nil {
				return err
			}
			it.Key, it.Type, it.Data, it.ExpiresAt = lk, "test", []byte(`{}`), expires
			it.Index = map[store.IndexName]store.IndexKey{store.LK1: {PK: ns + "entries", SK: "x"}}
			tx.Put(it)
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	entryExpiry := func() (int64, bool) {
		t.Helper()
		p, err := s.Query(ctx, store.Query{PK: ns + "entries"})
		if err != nil {
			t.Fatalf("Query entries: %v", err)
		}
		if len(p.Items) == 0 {
			return 0, false
		}
		return p.Items[0].ExpiresAt, true
	}
	put(future)
	if got, ok := entryExpiry(); !ok || got != future {
		t.Fatalf("entry ExpiresAt = %d (present %v), want %d", got, ok, future)
	}
	put(future + 60)
	if got, _ := entryExpiry(); got != future+60 {
		t.Fatalf("entry ExpiresAt after the item's changed = %d, want %d", got, future+60)
	}
	put(past)
	mustAbsent(t, s, lk)
	if _, ok := entryExpiry(); ok {
		t.Fatal("the lookup entry of an expired item is still read")
	}
	var found int
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		items, err := tx.Lookup(ctx, store.LK1, ns+"entries")
		found = len(items)
		return err
	})
	if err != nil || found != 0 {
		t.Fatalf("Lookup of an expired item: %d items, err %v", found, err)
	}
	put(0)
	if got := mustGet(t, s, lk); got.Version != 1 || got.ExpiresAt != 0 {
		t.Fatalf("created again over the expired item: %+v", got)
	}
}

// eventually polls cond (a global index may lag its table) for up to 10 s.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal(errors.New("condition not reached within 10 s"))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// testClaim checks store.Claim: one of several claimants at once holds a
// claim, the others are told so, and once the claim has expired it can be
// taken again.
func testClaim(t *testing.T, s store.Store, ns string) {
	ctx := ctxT(t)
	k := store.Key{PK: ns + "p", SK: "claim"}
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := store.Claim(ctx, s, k, time.Minute)
			if err != nil {
				t.Errorf("Claim: %v", err)
			}
			if ok {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := won.Load(); n != 1 {
		t.Fatalf("%d of 4 claimants at once hold the claim, want 1", n)
	}
	if got := mustGet(t, s, k); got.Type != store.TypeClaim || got.ExpiresAt < time.Now().Add(time.Minute).Unix() {
		t.Fatalf("claim marker %+v", got)
	}
	// A claim that expired (its holder died) is free.
	gone := store.Key{PK: ns + "p", SK: "expired"}
	if ok, err := store.Claim(ctx, s, gone, -time.Second); err != nil || !ok {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	if ok, err := store.Claim(ctx, s, gone, time.Minute); err != nil || !ok {
		t.Fatalf("Claim over an expired claim: %v %v, want it taken", ok, err)
	}
	if ok, err := store.Claim(ctx, s, gone, time.Minute); err != nil || ok {
		t.Fatalf("Claim while held: %v %v, want refused", ok, err)
	}
}
