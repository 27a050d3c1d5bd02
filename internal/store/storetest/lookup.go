package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

// lookupIDs runs a Lookup in its own transaction and returns the data of
// the items found.
func lookupIDs(t *testing.T, s store.Store, name store.IndexName, pk string) []string {
	t.Helper()
	var out []string
	err := store.Update(ctxT(t), s, func(tx *store.Tx) error {
		items, err := tx.Lookup(ctxT(t), name, pk)
		out = nil
		for _, it := range items {
			out = append(out, string(it.Data))
		}
		return err
	})
	if err != nil {
		t.Fatalf("Lookup(%s, %s): %v", name, pk, err)
	}
	return out
}

// entries returns the lookup entries stored under pk.
func entries(t *testing.T, s store.Store, pk string) []store.Item {
	t.Helper()
	var out []store.Item
	for _, it := range collect(t, s, store.Query{PK: pk}) {
		if it.Type == store.TypeLookupEntry {
			out = append(out, it)
		}
	}
	return out
}

func testLookupEntries(t *testing.T, s store.Store, ns string) {
	ctx := ctxT(t)
	put := func(sk, data string, lk map[store.IndexName]store.IndexKey) {
		t.Helper()
		err := store.Update(ctx, s, func(tx *store.Tx) error {
			if _, _, err := tx.Get(ctx, store.Key{PK: ns + "p", SK: sk}); err != nil {
				return err
			}
			tx.Put(withIndex(item(ns+"p", sk, data), lk))
			return nil
		})
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
	}
	fk, other := ns+"FK#k", ns+"FK#other"
	// Created with a key: the entry is written in the same commit, and a
	// lookup reads it at once, in index sort-key order.
	put("b", `"b"`, map[store.IndexName]store.IndexKey{store.LK1: {PK: fk, SK: "2"}, store.LK2: {PK: ns + "TK#t", SK: "b"}})
	put("a", `"a"`, map[store.IndexName]store.IndexKey{store.LK1: {PK: fk, SK: "1"}})
	if got := lookupIDs(t, s, store.LK1, fk); !slices.Equal(got, []string{`"a"`, `"b"`}) {
		t.Fatalf("lookup = %v, want a, b", got)
	}
	if got := lookupIDs(t, s, store.LK2, ns+"TK#t"); !slices.Equal(got, []string{`"b"`}) {
		t.Fatalf("lk2 lookup = %v, want b", got)
	}
	// Moved to another key: the old entry goes, the new one comes.
	put("b", `"b2"`, map[store.IndexName]store.IndexKey{store.LK1: {PK: other, SK: "2"}})
	if got := lookupIDs(t, s, store.LK1, fk); !slices.Equal(got, []string{`"a"`}) {
		t.Fatalf("after move, lookup = %v, want a", got)
	}
	if got := lookupIDs(t, s, store.LK1, other); !slices.Equal(got, []string{`"b2"`}) {
		t.Fatalf("after move, lookup of the new key = %v, want b2", got)
	}
	if n := len(entries(t, s, fk)); n != 1 {
		t.Fatalf("%d entries under the old key, want 1", n)
	}
	if n := len(entries(t, s, ns+"TK#t")); n != 0 {
		t.Fatalf("%d lk2 entries after the item left lk2, want 0", n)
	}
	// Out of the index: its entry is deleted with the write.
	put("a", `"a2"`, nil)
	if got := lookupIDs(t, s, store.LK1, fk); len(got) != 0 {
		t.Fatalf("after leaving the index, lookup = %v", got)
	}
	if n := len(entries(t, s, fk)); n != 0 {
		t.Fatalf("%d entries left, want 0", n)
	}
	// A delete deletes its entries.
	err := store.Update(ctx, s, func(tx *store.Tx) error {
		if _, _, err := tx.Get(ctx, store.Key{PK: ns + "p", SK: "b"}); err != nil {
			return err
		}
		tx.Delete(store.Key{PK: ns + "p", SK: "b"})
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if n := len(entries(t, s, other)); n != 0 {
		t.Fatalf("%d entries after delete, want 0", n)
	}
	// A lookup sees what its transaction staged, and tracks what it read.
	put("c", `"c"`, map[store.IndexName]store.IndexKey{store.LK3: {PK: ns + "AN#x", SK: "c"}})
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		tx.Put(withIndex(item(ns+"p", "d", `"d"`), map[store.IndexName]store.IndexKey{store.LK3: {PK: ns + "AN#x", SK: "d"}}))
		got, err := tx.Lookup(ctx, store.LK3, ns+"AN#x")
		if err != nil {
			return err
		}
		if len(got) != 2 || string(got[0].Data) != `"c"` || string(got[1].Data) != `"d"` {
			return fmt.Errorf("lookup in the transaction = %+v, want c and staged d", got)
		}
		tx.Put(withIndex(item(ns+"p", "c", `"c2"`), nil)) // a CAS on what Lookup read
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	wantVersion(t, s, store.Key{PK: ns + "p", SK: "c"}, 2)
	if got := lookupIDs(t, s, store.LK3, ns+"AN#x"); !slices.Equal(got, []string{`"d"`}) {
		t.Fatalf("lookup = %v, want d", got)
	}
	// An entry whose item no longer carries the key (written around
	// Update) is skipped.
	commit(t, s, store.Write{Put: ptr(withIndex(item(ns+"p", "d", `"d3"`), nil))})
	if got := lookupIDs(t, s, store.LK3, ns+"AN#x"); len(got) != 0 {
		t.Fatalf("stale entry returned %v", got)
	}
	// Not a lookup index; a blind put with lookup keys.
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		_, err := tx.Lookup(ctx, store.GSI1, fk)
		return err
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Lookup of a global index = %v, want ErrInvalid", err)
	}
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		tx.PutUnconditional(withIndex(item(ns+"p", "e", `{}`), map[store.IndexName]store.IndexKey{store.LK1: {PK: fk, SK: "e"}}))
		return nil
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("blind put with lookup keys = %v, want ErrInvalid", err)
	}
	mustAbsent(t, s, store.Key{PK: ns + "p", SK: "e"})
}

func ptr[T any](v T) *T { return &v }

func testCheckWrite(t *testing.T, s store.Store, ns string) {
	a, b := store.Key{PK: ns + "p", SK: "a"}, store.Key{PK: ns + "p", SK: "b"}
	commit(t, s, store.PutIfAbsent(item(a.PK, a.SK, `1`)))
	// A check that holds writes nothing itself and lets the rest commit.
	commit(t, s, store.Write{Check: &a, Cond: store.Cond{Kind: store.IfVersion, Version: 1}}, store.PutIfAbsent(item(b.PK, b.SK, `2`)))
	wantVersion(t, s, a, 1)
	wantVersion(t, s, b, 1)
	// A check that fails fails the commit and names itself.
	c := store.Key{PK: ns + "p", SK: "c"}
	err := s.Commit(ctxT(t), []store.Write{store.PutIfAbsent(item(c.PK, c.SK, `3`)), {Check: &a, Cond: store.Cond{Kind: store.IfVersion, Version: 2}}})
	wantConflict(t, err, 1, a)
	mustAbsent(t, s, c)
	err = s.Commit(ctxT(t), []store.Write{{Check: &a, Cond: store.Cond{Kind: store.IfAbsent}}})
	wantConflict(t, err, 0, a)
	commit(t, s, store.Write{Check: &c, Cond: store.Cond{Kind: store.IfAbsent}})
	mustAbsent(t, s, c)
	// A check needs a condition and is one kind of write only.
	for _, w := range []store.Write{{Check: &a}, {Check: &a, Delete: &b, Cond: store.Cond{Kind: store.IfAbsent}}} {
		if err := s.Commit(ctxT(t), []store.Write{w}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Commit(%+v) = %v, want ErrInvalid", w, err)
		}
	}
}

func testUpdateCheck(t *testing.T, s store.Store, ns string) {
	ctx := ctxT(t)
	gate, out := store.Key{PK: ns + "p", SK: "gate"}, store.Key{PK: ns + "p", SK: "out"}
	commit(t, s, store.PutIfAbsent(item(gate.PK, gate.SK, `"open"`)))
	// The decision depends on gate, which a concurrent commit changes
	// between the read and the commit: the check fails the first attempt
	// and the function runs again on what is there now.
	runs := 0
	err := store.Update(ctx, s, func(tx *store.Tx) error {
		runs++
		it, _, err := tx.Get(ctx, gate)
		if err != nil {
			return err
		}
		if runs == 1 {
			commit(t, s, store.PutIfVersion(item(gate.PK, gate.SK, `"closed"`), it.Version))
		}
		tx.Check(gate)
		tx.Put(item(out.PK, out.SK, string(it.Data)))
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if runs != 2 {
		t.Fatalf("fn ran %d times, want 2", runs)
	}
	if d := mustGet(t, s, out).Data; string(d) != `"closed"` {
		t.Fatalf("decided on %s, want the gate as it is now", d)
	}
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		tx.Check(store.Key{PK: ns + "p", SK: "unread"})
		return nil
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Check of an unread key = %v, want ErrInvalid", err)
	}
}

func testLookupOverflow(t *testing.T, s store.Store, ns string) {
	// Over a hundred sequential calls, the best-effort entry deletes among
	// them: on an emulator under heavy load they outlast ctxT's 30 s, and a
	// delete cut off by the deadline would be reported as left behind.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const n = 60 // 60 items and 120 entries: more than one commit holds
	keys := func(i int) map[store.IndexName]store.IndexKey {
		return map[store.IndexName]store.IndexKey{
			store.LK1: {PK: ns + "FK#all", SK: fmt.Sprintf("%03d", i)},
			store.LK2: {PK: ns + "TK#all", SK: fmt.Sprintf("%03d", i)},
		}
	}
	err := store.Update(ctx, s, func(tx *store.Tx) error {
		for i := range n {
			tx.Put(withIndex(item(ns+"p", fmt.Sprintf("%03d", i), `{}`), keys(i)))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update of %d items with %d entries: %v", n, 2*n, err)
	}
	if got := lookupIDs(t, s, store.LK2, ns+"TK#all"); len(got) != n {
		t.Fatalf("lookup found %d, want %d", len(got), n)
	}
	// Taking the keys away: the entry deletes that do not fit in the
	// commit follow it, and none is left.
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		items, err := tx.Lookup(ctx, store.LK1, ns+"FK#all")
		for _, it := range items {
			tx.Put(withIndex(item(it.PK, it.SK, `{"closed":true}`), nil))
		}
		return err
	})
	if err != nil {
		t.Fatalf("Update taking %d items out of both lookups: %v", n, err)
	}
	if got := lookupIDs(t, s, store.LK1, ns+"FK#all"); len(got) != 0 {
		t.Fatalf("after the commit, lookup found %d, want 0", len(got))
	}
	if left := len(entries(t, s, ns+"FK#all")) + len(entries(t, s, ns+"TK#all")); left != 0 {
		t.Fatalf("%d entries left, want 0", left)
	}
	// More staged writes than one commit holds is still refused.
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		for i := range store.MaxCommitWrites + 1 {
			tx.Put(withIndex(item(ns+"q", fmt.Sprintf("%03d", i), `{}`), keys(i)))
		}
		return nil
	})
	if !errors.Is(err, store.ErrTooManyWrites) {
		t.Fatalf("Update of %d items = %v, want ErrTooManyWrites", store.MaxCommitWrites+1, err)
	}
}

// testPutAside: a write put aside is committed with or without other
// writes, blind (over any version), and one with lookup keys is refused.
func testPutAside(t *testing.T, s store.Store, ns string) {
	ctx := ctxT(t)
	memo, rec := store.Key{PK: ns + "p", SK: "memo"}, store.Key{PK: ns + "p", SK: "rec"}
	for i, withOther := range []bool{false, true, false} {
		err := store.Update(ctx, s, func(tx *store.Tx) error {
			tx.PutAside(item(memo.PK, memo.SK, fmt.Sprintf(`{"n":%d}`, i)))
			if withOther {
				tx.Put(item(rec.PK, rec.SK, `{"r":1}`))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if got := mustGet(t, s, memo); string(got.Data) != fmt.Sprintf(`{"n":%d}`, i) {
			t.Fatalf("round %d: aside item %s", i, got.Data)
		}
	}
	wantVersion(t, s, rec, 1)
	err := store.Update(ctx, s, func(tx *store.Tx) error {
		tx.PutAside(withIndex(item(ns+"p", "keyed", `{}`), map[store.IndexName]store.IndexKey{store.LK1: {PK: ns + "FK#x", SK: "keyed"}}))
		return nil
	})
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("put aside with lookup keys = %v, want ErrInvalid", err)
	}
	mustAbsent(t, s, store.Key{PK: ns + "p", SK: "keyed"})
}

// testLookupIn: two lookup indexes that share a partition are read
// together by LookupIn, and apart by Lookup.
func testLookupIn(t *testing.T, s store.Store, ns string) {
	ctx := ctxT(t)
	pk := ns + "FK#shared"
	err := store.Update(ctx, s, func(tx *store.Tx) error {
		tx.Put(withIndex(item(ns+"p", "sat", `"sat"`), map[store.IndexName]store.IndexKey{store.LK1: {PK: pk, SK: "sat"}}))
		tx.Put(withIndex(item(ns+"p", "ref", `"ref"`), map[store.IndexName]store.IndexKey{store.LK4: {PK: pk, SK: "ref"}}))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := lookupIDs(t, s, store.LK1, pk); !slices.Equal(got, []string{`"sat"`}) {
		t.Fatalf("Lookup lk1 = %v, want sat only", got)
	}
	var both []string
	err = store.Update(ctx, s, func(tx *store.Tx) error {
		items, err := tx.LookupIn(ctx, pk, store.LK1, store.LK4)
		for _, it := range items {
			both = append(both, string(it.Data))
		}
		return err
	})
	if err != nil || !slices.Equal(both, []string{`"ref"`, `"sat"`}) {
		t.Fatalf("LookupIn lk1, lk4 = %v, %v; want ref and sat", both, err)
	}
}
