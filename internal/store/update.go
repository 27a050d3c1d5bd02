package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Tx is one optimistic read-modify-write: items read through it are written
// back with a compare-and-set on the version that was read, items read as
// absent are created with a conditional create. It also keeps the entries
// of the lookup indexes (see Lookups) of the items it writes, in the same
// commit (or around it, for a store that keeps them apart: EntriesApart).
// It is not safe for concurrent use.
type Tx struct {
	s      Store
	reads  map[Key]int64 // 0 = read as absent
	writes []Write
	staged map[Key]int
	// lookups holds the lookup keys of each item as it was read.
	lookups map[Key]map[IndexName]IndexKey
	// expiries holds the ExpiresAt of each item with lookup keys as it
	// was read: its entries are written again when it changes.
	expiries map[Key]int64
	// aside holds the blind writes that need not be atomic with the
	// commit (PutAside).
	aside []Write
	err   error
}

func newTx(s Store) *Tx {
	return &Tx{s: s, reads: map[Key]int64{}, staged: map[Key]int{}, lookups: map[Key]map[IndexName]IndexKey{}, expiries: map[Key]int64{}}
}

// noteRead records what a commit needs of an item read at it.Version.
func (tx *Tx) noteRead(it Item) {
	if _, seen := tx.reads[it.Key]; seen {
		return
	}
	tx.reads[it.Key] = it.Version
	if lk := lookupKeys(it); lk != nil {
		tx.lookups[it.Key] = lk
		tx.expiries[it.Key] = it.ExpiresAt
	}
}

// lookupKeys returns the item's keys in the lookup indexes, or nil.
func lookupKeys(it Item) map[IndexName]IndexKey {
	var out map[IndexName]IndexKey
	for _, name := range Lookups {
		if k := it.Index[name]; !k.IsZero() {
			if out == nil {
				out = map[IndexName]IndexKey{}
			}
			out[name] = k
		}
	}
	return out
}

// Get reads key. It returns ok=false when the item does not exist; a later
// Put of that key then becomes a conditional create.
func (tx *Tx) Get(ctx context.Context, key Key) (Item, bool, error) {
	if i, ok := tx.staged[key]; ok && tx.writes[i].Check == nil {
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
	tx.noteRead(it)
	return it, true, nil
}

// Query reads a page; items read this way are not version-tracked until Got.
func (tx *Tx) Query(ctx context.Context, q Query) (Page, error) { return tx.s.Query(ctx, q) }

// Track records version v of an item read outside Get (e.g. by Query), so
// that a later Put of it is a compare-and-set against v.
func (tx *Tx) Track(it Item) { tx.noteRead(it) }

// Put stages a write of it. If the key was read (or tracked) the write is
// conditional on the version read; otherwise it is a conditional create.
// The entries of its lookup keys follow at commit.
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
// subject's last-fact time, where the last writer may win). An item with
// lookup keys cannot be written blind (its old entries would be unknown):
// Update then fails with an error wrapping ErrInvalid.
func (tx *Tx) PutUnconditional(it Item) {
	if lookupKeys(it) != nil {
		tx.fail(fmt.Errorf("%w: %s has lookup keys and cannot be put unconditionally", ErrInvalid, it.Key))
		return
	}
	tx.stage(Write{Put: &it})
}

// PutAside stages a blind write of it that need not be atomic with the
// commit: derived data that the last writer may replace, such as the
// memory of the latest fact reported with a key. On a store that keeps
// lookup entries apart (EntriesApart: a transaction there costs each write
// twice) it is written before the commit in a write of its own, and stays
// written if the commit then fails; on any other store it joins the
// commit. An item with lookup keys cannot be put aside (Update then fails
// with an error wrapping ErrInvalid).
func (tx *Tx) PutAside(it Item) {
	if lookupKeys(it) != nil {
		tx.fail(fmt.Errorf("%w: %s has lookup keys and cannot be put aside", ErrInvalid, it.Key))
		return
	}
	tx.aside = append(tx.aside, Write{Put: &it})
}

// Delete stages a delete of key, conditional on the version read if it was
// read, or on its continued absence if it was read as absent. The entries
// of the lookup keys it was read with are deleted with it.
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

// Check makes the commit require that the item under key, which must have
// been read through the transaction, is still as it was read (same
// version, or still absent). Use it when what is written depends on an
// item that is not written, so that a concurrent change of that item makes
// the commit conflict and the function run again (no write skew). A key
// that is also written needs no Check: its write carries the condition.
// A Check of a key not read makes Update fail with an error wrapping
// ErrInvalid.
func (tx *Tx) Check(key Key) {
	v, ok := tx.reads[key]
	if !ok {
		tx.fail(fmt.Errorf("%w: Check of %s, which the transaction did not read", ErrInvalid, key))
		return
	}
	if _, staged := tx.staged[key]; staged {
		return
	}
	w := Write{Check: &key, Cond: Cond{Kind: IfAbsent}}
	if v > 0 {
		w.Cond = Cond{Kind: IfVersion, Version: v}
	}
	tx.stage(w)
}

func (tx *Tx) fail(err error) {
	if tx.err == nil {
		tx.err = err
	}
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

// Staged counts the writes staged so far (lookup entries not included), for
// a caller that sizes its commit to MaxCommitWrites.
func (tx *Tx) Staged() int { return len(tx.writes) }

// Writes returns the staged writes, in staging order, then the writes put
// aside (PutAside), followed by the writes of the lookup entries they
// imply.
func (tx *Tx) Writes() []Write {
	return append(append(slices.Clone(tx.writes), tx.aside...), tx.entryWrites()...)
}

// Update runs fn in an optimistic transaction and commits what it staged,
// atomically (the lookup entries it implies in the same commit, or around
// it when the store keeps them apart: EntriesApart). On a condition failure it runs fn again on fresh reads, up to
// a bounded number of attempts with jittered backoff; after that it returns
// the conflict. fn must be a pure function of what it reads (it may run more
// than once). An error returned by fn aborts without writing.
func Update(ctx context.Context, s Store, fn func(tx *Tx) error) error {
	const attempts = 64
	var err error
	for attempt := 0; attempt < attempts; attempt++ {
		tx := newTx(s)
		if err = fn(tx); err != nil {
			return err
		}
		if tx.err != nil {
			return tx.err
		}
		if len(tx.writes) == 0 && len(tx.aside) == 0 {
			return nil
		}
		if entriesApart(s) {
			err = tx.commitApart(ctx)
			if err == nil {
				return nil
			}
			if !errors.Is(err, ErrConflict) || attempt == attempts-1 {
				return err
			}
			if err := backoff(ctx, attempt); err != nil {
				return err
			}
			continue
		}
		writes := tx.Writes()
		var late []Key
		if len(writes) > MaxCommitWrites {
			// A conflict here (a transaction of entries cancelled by a
			// concurrent one) is retried like the commit's own.
			writes, late, err = tx.splitOverflow(ctx)
		}
		if err == nil {
			err = s.Commit(ctx, writes)
		}
		if err == nil {
			// Best effort: an entry left behind is skipped by lookups.
			for _, k := range late {
				_ = dropStale(ctx, s, k)
			}
			return nil
		}
		if !errors.Is(err, ErrConflict) || attempt == attempts-1 {
			return err
		}
		if err := backoff(ctx, attempt); err != nil {
			return err
		}
	}
	return err
}

// backoff waits before attempt+1 of Update. Full jitter under a low cap:
// a writer that lost keeps retrying about as often as the ones that won,
// so none starves.
func backoff(ctx context.Context, attempt int) error {
	ceiling := time.Duration(1<<min(attempt, 5)) * time.Millisecond
	d := time.Duration(rand.Int64N(int64(ceiling))) + 100*time.Microsecond
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// Remove deletes the item under key with its lookup entries, through
// Update (read, then a delete conditional on what was read), and returns
// its type, or "" when there was none. Errors are Update's.
func Remove(ctx context.Context, s Store, key Key) (string, error) {
	var typ string
	err := Update(ctx, s, func(tx *Tx) error {
		typ = ""
		it, ok, err := tx.Get(ctx, key)
		if err != nil || !ok {
			return err
		}
		typ = it.Type
		tx.Delete(key)
		return nil
	})
	return typ, err
}
