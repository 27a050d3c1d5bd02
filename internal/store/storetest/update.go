package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/agentclock/clockwork/internal/store"
)

func testUpdateCounter(t *testing.T, s store.Store, ns string) {
	const workers, each = 8, 50
	k := store.Key{PK: ns + "counter", SK: "c"}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := store.Update(context.Background(), s, func(tx *store.Tx) error {
					it, ok, err := tx.Get(context.Background(), k)
					if err != nil {
						return err
					}
					n := 0
					if ok {
						if _, err := fmt.Sscanf(string(it.Data), `{"n":%d}`, &n); err != nil {
							return err
						}
					}
					tx.Put(item(k.PK, k.SK, fmt.Sprintf(`{"n":%d}`, n+1)))
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Update: %v", err)
	}
	got := mustGet(t, s, k)
	if string(got.Data) != fmt.Sprintf(`{"n":%d}`, workers*each) || got.Version != workers*each {
		t.Fatalf("counter = %s at version %d, want %d", got.Data, got.Version, workers*each)
	}
}

func testUpdateTooManyWrites(t *testing.T, s store.Store, ns string) {
	pk := ns + "many"
	err := store.Update(ctxT(t), s, func(tx *store.Tx) error {
		for i := range store.MaxCommitWrites + 1 {
			tx.Put(item(pk, fmt.Sprintf("%04d", i), `{}`))
		}
		return nil
	})
	if !errors.Is(err, store.ErrTooManyWrites) || !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Update = %v, want ErrTooManyWrites", err)
	}
	if got := collect(t, s, store.Query{PK: pk}); len(got) != 0 {
		t.Fatalf("Update over the limit wrote %d items", len(got))
	}
	// Exactly the limit is fine.
	err = store.Update(ctxT(t), s, func(tx *store.Tx) error {
		for i := range store.MaxCommitWrites {
			tx.Put(item(pk, fmt.Sprintf("%04d", i), `{}`))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update of MaxCommitWrites writes: %v", err)
	}
	if got := collect(t, s, store.Query{PK: pk}); len(got) != store.MaxCommitWrites {
		t.Fatalf("got %d items, want %d", len(got), store.MaxCommitWrites)
	}
}

func testUpdateFnError(t *testing.T, s store.Store, ns string) {
	k := store.Key{PK: ns + "p", SK: "a"}
	boom := errors.New("boom")
	err := store.Update(ctxT(t), s, func(tx *store.Tx) error {
		tx.Put(item(k.PK, k.SK, `{}`))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	mustAbsent(t, s, k)

	// A Put of a key read as absent is a conditional create, a Put of a key
	// read at a version is a compare-and-set on it, and a Get sees what the
	// transaction staged.
	err = store.Update(ctxT(t), s, func(tx *store.Tx) error {
		if _, ok, err := tx.Get(ctxT(t), k); err != nil || ok {
			return fmt.Errorf("tx.Get = %v, %v; want absent", ok, err)
		}
		tx.Put(item(k.PK, k.SK, `{"n":1}`))
		if it, ok, err := tx.Get(ctxT(t), k); err != nil || !ok || string(it.Data) != `{"n":1}` {
			return fmt.Errorf("tx.Get after Put = %+v, %v, %v", it, ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	wantVersion(t, s, k, 1)
	err = store.Update(ctxT(t), s, func(tx *store.Tx) error {
		if _, ok, err := tx.Get(ctxT(t), k); err != nil || !ok {
			return fmt.Errorf("tx.Get = %v, %v; want present", ok, err)
		}
		tx.Delete(k)
		if _, ok, err := tx.Get(ctxT(t), k); err != nil || ok {
			return fmt.Errorf("tx.Get after Delete = %v, %v; want absent", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	mustAbsent(t, s, k)
}
