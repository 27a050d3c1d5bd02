package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// The lookup indexes' entries: written with the items that give them
// their keys, read consistently by Tx.Lookup.

// entryWrites returns the puts and deletes of lookup entries that the
// staged writes imply: for each written item and lookup index whose key
// differs from the one the item was read with, a delete of the old entry
// and a put of the new one (and a put of the same entry again when the
// item's ExpiresAt changed: an entry expires with its item). They are unconditional: the item's own write,
// in the same commit, is conditional on the version whose keys were read.
func (tx *Tx) entryWrites() []Write {
	var out []Write
	at := map[Key]int{}
	add := func(w Write) {
		k := w.Key()
		if i, ok := at[k]; ok {
			if w.Put != nil { // a put wins over a delete of the same entry
				out[i] = w
			}
			return
		}
		at[k] = len(out)
		out = append(out, w)
	}
	for _, w := range tx.writes {
		if w.Check != nil {
			continue
		}
		key := w.Key()
		old := tx.lookups[key]
		var cur map[IndexName]IndexKey
		var expires int64
		if w.Put != nil {
			cur = lookupKeys(*w.Put)
			expires = w.Put.ExpiresAt
		}
		reExpire := expires != tx.expiries[key]
		// The version the item's write gives it (puts with lookup keys
		// are always conditional).
		version := w.Cond.Version + 1
		if w.Cond.Kind == IfAbsent {
			version = 1
		}
		for _, name := range Lookups {
			o, n := old[name], cur[name]
			if o == n && (n.IsZero() || !reExpire) {
				continue
			}
			if !o.IsZero() && o != n {
				ek := Key(o)
				add(Write{Delete: &ek})
			}
			if !n.IsZero() {
				add(Write{Put: &Item{Key: Key(n), Type: TypeLookupEntry, Data: encodeEntry(key, version), ExpiresAt: expires}})
			}
		}
	}
	return out
}

// splitOverflow handles a commit too large for one atomic step because of
// its lookup entries. It commits the puts of new entries first, in commits
// of their own, and returns the writes of the main commit (the staged
// writes and as many deletes of old entries as fit) and the entries whose
// deletes did not fit, which Update deletes after the main commit with
// dropStale. A lookup stays exact: an entry is committed no later than the
// item write that gives the item its key (a lookup that sees the item's
// commit sees the entry), and an entry left behind, or put by an attempt
// that then failed, names an item without that key, which Lookup skips.
// It returns ErrTooManyWrites, having written nothing, when the staged
// writes alone do not fit.
func (tx *Tx) splitOverflow(ctx context.Context) (main []Write, late []Key, err error) {
	if len(tx.writes) > MaxCommitWrites {
		return nil, nil, ErrTooManyWrites
	}
	main = slices.Clone(tx.writes)
	// Writes put aside go first, like the entries' puts: they need not
	// be atomic with the commit.
	puts := slices.Clone(tx.aside)
	for _, w := range tx.entryWrites() {
		switch {
		case w.Put != nil:
			puts = append(puts, w)
		case len(main) < MaxCommitWrites:
			main = append(main, w)
		default:
			late = append(late, *w.Delete)
		}
	}
	for len(puts) > 0 {
		n := min(len(puts), MaxCommitWrites)
		if err := tx.s.Commit(ctx, puts[:n]); err != nil {
			return nil, nil, err
		}
		puts = puts[n:]
	}
	return main, late, nil
}

// dropStale deletes the lookup entry under key unless the item it names
// carries that key, as a compare-and-set on the entry as read: an entry
// written again meanwhile (the item took the key again) stays. An entry
// written for a version of the item later than the one read stays too: it
// may be the entry of a commit not yet applied, whose writer put it first.
// (Versions restart when an item is deleted and created again, so an entry
// of an absent item is deleted.)
func dropStale(ctx context.Context, s Store, key Key) error {
	return Update(ctx, s, func(tx *Tx) error {
		e, ok, err := tx.Get(ctx, key)
		if err != nil || !ok || e.Type != TypeLookupEntry {
			return err
		}
		target, err := decodeEntry(e)
		if err != nil {
			return err
		}
		it, ok, err := tx.Get(ctx, target)
		if err != nil {
			return err
		}
		if ok {
			for _, k := range lookupKeys(it) {
				if Key(k) == key {
					return nil
				}
			}
		}
		if ok && entryVersion(e) > it.Version {
			return nil
		}
		tx.Delete(key)
		return nil
	})
}

// entryData is the data of a lookup entry: the key of the item it names
// and the version of the item whose commit put the entry (absent in
// entries of earlier versions).
type entryData struct {
	Key
	Version int64 `json:"v,omitempty"`
}

// encodeEntry and decodeEntry are the data of a lookup entry.
func encodeEntry(k Key, version int64) []byte {
	b, _ := json.Marshal(entryData{k, version})
	return b
}

func decodeEntry(it Item) (Key, error) {
	var d entryData
	if err := json.Unmarshal(it.Data, &d); err != nil || d.PK == "" || d.SK == "" {
		return Key{}, fmt.Errorf("store: lookup entry %s does not name an item: %w", it.Key, ErrInvalid)
	}
	return d.Key, nil
}

func entryVersion(it Item) int64 {
	var d entryData
	_ = json.Unmarshal(it.Data, &d)
	return d.Version
}

// EntriesApart is implemented by a Store whose multi-write commits cost
// more than their writes one by one (a DynamoDB transaction costs each
// write twice). When LookupEntriesApart reports true, Update writes the
// lookup entries outside the item's commit, each in a write of its own: the
// new entries before the commit, so that a lookup that sees the commit sees
// its entries, and the deletes of the entries the commit made stale after
// it (dropStale, best effort). A lookup stays exact, as in splitOverflow:
// an entry left behind, or put by an attempt that then failed, names an
// item without that key, which Lookup skips.
type EntriesApart interface {
	LookupEntriesApart() bool
}

func entriesApart(s Store) bool {
	ea, ok := s.(EntriesApart)
	return ok && ea.LookupEntriesApart()
}

// commitApart commits tx with its lookup entries apart (see EntriesApart).
func (tx *Tx) commitApart(ctx context.Context) error {
	if len(tx.writes) > MaxCommitWrites {
		return ErrTooManyWrites
	}
	puts := slices.Clone(tx.aside)
	for _, w := range tx.entryWrites() {
		if w.Put != nil {
			puts = append(puts, w)
		}
	}
	if err := eachAtOnce(puts, func(w Write) error { return tx.s.Commit(ctx, []Write{w}) }); err != nil {
		return err
	}
	if len(tx.writes) == 0 {
		return nil
	}
	if err := tx.s.Commit(ctx, tx.writes); err != nil {
		return err
	}
	// Best effort: an entry left behind is skipped by lookups.
	_ = eachAtOnce(tx.staleEntries(), func(d staleEntry) error { return dropAfter(ctx, tx.s, d.key, d.version) })
	return nil
}

// staleEntry is a lookup entry that a commit made stale: the item it names
// was written at version without its key (or deleted at that version).
type staleEntry struct {
	key     Key
	version int64
}

// staleEntries returns the entries the staged writes make stale.
func (tx *Tx) staleEntries() []staleEntry {
	var out []staleEntry
	seen := map[Key]bool{}
	for _, w := range tx.writes {
		if w.Check != nil {
			continue
		}
		old := tx.lookups[w.Key()]
		var cur map[IndexName]IndexKey
		version := w.Cond.Version
		if w.Put != nil {
			cur = lookupKeys(*w.Put)
			version++
		}
		for _, name := range Lookups {
			if o := old[name]; !o.IsZero() && o != cur[name] && !seen[Key(o)] {
				seen[Key(o)] = true
				out = append(out, staleEntry{Key(o), version})
			}
		}
	}
	return out
}

// dropAfter deletes the lookup entry under key after a commit wrote the
// item it names at version without that key, unless the entry was put again
// since for a later version (the item takes the key again), as a
// compare-and-set on the entry as read. It needs no read of the item.
func dropAfter(ctx context.Context, s Store, key Key, version int64) error {
	return Update(ctx, s, func(tx *Tx) error {
		e, ok, err := tx.Get(ctx, key)
		if err != nil || !ok || e.Type != TypeLookupEntry || entryVersion(e) > version {
			return err
		}
		tx.Delete(key)
		return nil
	})
}

// eachAtOnce calls fn for every element, eight at a time, and returns the
// first error.
func eachAtOnce[T any](xs []T, fn func(T) error) error {
	if len(xs) == 1 {
		return fn(xs[0])
	}
	errs := make([]error, len(xs))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, x := range xs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(x)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Lookup returns the items whose key in lookup index name has partition pk,
// in index sort-key order, read consistently: the entries' partition is
// read from the table (Query), then each item (Get, several at a time), and
// every item is tracked like a Get, so writing one back is a
// compare-and-set. Items staged in this transaction are seen as staged. An
// entry whose item no longer carries that lookup key is skipped. It returns
// an error wrapping ErrInvalid for a name that is not a lookup index, and
// the store's errors.
func (tx *Tx) Lookup(ctx context.Context, name IndexName, pk string) ([]Item, error) {
	return tx.LookupIn(ctx, pk, name)
}

// LookupIn is Lookup over several lookup indexes whose entries share
// partition pk (a repository may give two indexes one partition so that
// one read finds the items of both): it returns the items whose key in
// any of names is (pk, the entry's sort key).
func (tx *Tx) LookupIn(ctx context.Context, pk string, names ...IndexName) ([]Item, error) {
	for _, name := range names {
		if !IsLookup(name) {
			return nil, fmt.Errorf("%w: %q is not a lookup index", ErrInvalid, name)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: no lookup index named", ErrInvalid)
	}
	keyed := func(it Item, sk string) bool {
		for _, name := range names {
			if ixk := it.Index[name]; ixk.PK == pk && (sk == "" || ixk.SK == sk) {
				return true
			}
		}
		return false
	}
	type hit struct {
		sk  string
		key Key
	}
	var hits []hit
	q := Query{PK: pk, Limit: MaxLimit}
	for {
		p, err := tx.s.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, e := range p.Items {
			if e.Type != TypeLookupEntry {
				continue
			}
			k, err := decodeEntry(e)
			if err != nil {
				return nil, err
			}
			hits = append(hits, hit{e.SK, k})
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	// Items staged with this key that have no entry yet.
	seen := map[Key]bool{}
	for _, h := range hits {
		seen[h.key] = true
	}
	for _, w := range tx.writes {
		if w.Put == nil || seen[w.Put.Key] || !keyed(*w.Put, "") {
			continue
		}
		for _, name := range names {
			if ixk := w.Put.Index[name]; ixk.PK == pk {
				hits = append(hits, hit{ixk.SK, w.Put.Key})
				break
			}
		}
		seen[w.Put.Key] = true
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return strings.Compare(a.sk, b.sk) })

	// Fetch what is neither staged nor known, several at a time (one
	// alone, the common case, without a goroutine).
	fetched := make([]*Item, len(hits))
	fetch := func(i int) error {
		it, err := tx.s.Get(ctx, hits[i].key)
		switch {
		case errors.Is(err, ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		fetched[i] = &it
		return nil
	}
	var todo []int
	for i, h := range hits {
		if _, staged := tx.staged[h.key]; !staged {
			todo = append(todo, i)
		}
	}
	if len(todo) == 1 {
		if err := fetch(todo[0]); err != nil {
			return nil, err
		}
	} else {
		var g errgroup.Group
		g.SetLimit(8)
		for _, i := range todo {
			g.Go(func() error { return fetch(i) })
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
	}
	var out []Item
	for i, h := range hits {
		var it Item
		if _, staged := tx.staged[h.key]; staged {
			got, ok, err := tx.Get(ctx, h.key)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			it = got
		} else {
			if fetched[i] == nil {
				if _, seen := tx.reads[h.key]; !seen {
					tx.reads[h.key] = 0
				}
				continue
			}
			it = *fetched[i]
			tx.noteRead(it)
		}
		if !keyed(it, h.sk) {
			continue
		}
		out = append(out, it)
	}
	return out, nil
}

// ErrTooManyWrites is returned when one Update stages more writes (lookup
// entries included) than one atomic commit may hold.
var ErrTooManyWrites = fmt.Errorf("%w: more than %d writes in one commit", ErrInvalid, MaxCommitWrites)
