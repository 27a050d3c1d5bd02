package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Tx is one optimistic read-modify-write: items read through it are written
// back with a compare-and-set on the version that was read, items read as
// absent are created with a conditional create. It is not safe for
// concurrent use.
type Tx struct {
	s      Store
	reads  map[Key]int64 // 0 = read as absent
	writes []Write
	staged map[Key]int
}

// Get reads key. It returns ok=false when the item does not exist; a later
// Put of that key then becomes a conditional create.
func (tx *Tx) Get(ctx context.Context, key Key) (Item, bool, error) {
	if i, ok := tx.staged[key]; ok {
		if tx.writes[i].Put == nil {
			return Item{}, false, nil // staged delete
		}
		return *tx.writes[i].Put, true, nil
	}
	it, err := tx.s.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		if _, seen := tx.reads[key]; !seen {
			tx.reads[key] = 0
		}
		return Item{}, false, nil
	}
	if err != nil {
		return Item{}, false, err
	}
	if _, seen := tx.reads[key]; !seen {
		tx.reads[key] = it.Version
	}
	return it, true, nil
}

// Query reads a page; items read this way are not version-tracked until Got.
func (tx *Tx) Query(ctx context.Context, q Query) (Page, error) { return tx.s.Query(ctx, q) }

// Track records version v of an item read outside Get (e.g. by Query), so
// that a later Put of it is a compare-and-set against v.
func (tx *Tx) Track(it Item) {
	if _, seen := tx.reads[it.Key]; !seen {
		tx.reads[it.Key] = it.Version
	}
}

// Put stages a write of it. If the key was read (or tracked) the write is
// conditional on the version read; otherwise it is a conditional create.
func (tx *Tx) Put(it Item) {
	w := Write{Put: &it}
	if v, ok := tx.reads[it.Key]; ok && v > 0 {
		w.Cond = Cond{Kind: IfVersion, Version: v}
	} else {
		w.Cond = Cond{Kind: IfAbsent}
	}
	tx.stage(w)
}

// PutUnconditional stages a blind write of it (for derived data such as a
// subject's last-fact time, where the last writer may win).
func (tx *Tx) PutUnconditional(it Item) { tx.stage(Write{Put: &it}) }

// Delete stages a delete of key, conditional on the version read if it was
// read, or on its continued absence if it was read as absent.
func (tx *Tx) Delete(key Key) {
	w := Write{Delete: &key}
	if v, ok := tx.reads[key]; ok {
		if v > 0 {
			w.Cond = Cond{Kind: IfVersion, Version: v}
		} else {
			w.Cond = Cond{Kind: IfAbsent}
		}
	}
	tx.stage(w)
}

func (tx *Tx) stage(w Write) {
	k := w.Key()
	if i, ok := tx.staged[k]; ok {
		w.Cond = tx.writes[i].Cond
		tx.writes[i] = w
		return
	}
	tx.staged[k] = len(tx.writes)
	tx.writes = append(tx.writes, w)
}

// Writes returns the staged writes, in staging order.
func (tx *Tx) Writes() []Write { return tx.writes }

// ErrTooManyWrites is returned when one Update stages more writes than one
// atomic commit may hold.
var ErrTooManyWrites = fmt.Errorf("%w: more than %d writes in one commit", ErrInvalid, MaxCommitWrites)

// Update runs fn in an optimistic transaction and commits what it staged,
// atomically. On a condition failure it runs fn again on fresh reads, up to
// a bounded number of attempts with jittered backoff; after that it returns
// the conflict. fn must be a pure function of what it reads (it may run more
// than once). An error returned by fn aborts without writing.
func Update(ctx context.Context, s Store, fn func(tx *Tx) error) error {
	const attempts = 64
	var err error
	for attempt := 0; attempt < attempts; attempt++ {
		tx := &Tx{s: s, reads: map[Key]int64{}, staged: map[Key]int{}}
		if err = fn(tx); err != nil {
			return err
		}
		if len(tx.writes) == 0 {
			return nil
		}
		if len(tx.writes) > MaxCommitWrites {
			return ErrTooManyWrites
		}
		err = s.Commit(ctx, tx.writes)
		if !errors.Is(err, ErrConflict) || attempt == attempts-1 {
			return err
		}
		// Full jitter under a low cap: a writer that lost keeps retrying
		// about as often as the ones that won, so none starves.
		ceiling := time.Duration(1<<min(attempt, 5)) * time.Millisecond
		backoff := time.Duration(rand.Int64N(int64(ceiling))) + 100*time.Microsecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
	return err
}
