// Package storetest is the contract test suite of the persistence port. Every
// adapter of store.Store runs Run, and adapters that also implement
// store.FeedReader run RunFeed, so that all adapters keep the same semantics.
//
// The suite writes only under partition keys that begin with a random prefix
// chosen per subtest, so it also runs against a shared table (DynamoDB Local)
// that is not emptied between subtests. It never closes the stores it is
// given: newStore arranges their cleanup (t.Cleanup). It writes a few hundred
// items in total, in commits of up to store.MaxCommitWrites writes, so that it
// stays fast against remote adapters.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

// Run runs the store.Store contract against stores made by newStore, one per
// subtest. newStore must return an open store (failing t itself if it cannot)
// and register its cleanup with t.Cleanup. Failures are reported through t;
// Run returns nothing.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, ns string)
	}{
		{"GetNotFound", testGetNotFound},
		{"RoundTrip", testRoundTrip},
		{"IfAbsent", testIfAbsent},
		{"IfVersion", testIfVersion},
		{"Unconditional", testUnconditional},
		{"Delete", testDelete},
		{"CommitAtomic", testCommitAtomic},
		{"VersionAssignedByCommit", testVersionAssigned},
		{"CommitInvalid", testCommitInvalid},
		{"QueryTable", testQueryTable},
		{"QueryPagination", testQueryPagination},
		{"QueryIndexSparse", testQueryIndexSparse},
		{"QueryIndexTies", testQueryIndexTies},
		{"QueryInvalid", testQueryInvalid},
		{"UpdateConcurrentCounter", testUpdateCounter},
		{"UpdateTooManyWrites", testUpdateTooManyWrites},
		{"UpdateFnError", testUpdateFnError},
		{"LookupEntries", testLookupEntries},
		{"CheckWrite", testCheckWrite},
		{"UpdateCheck", testUpdateCheck},
		{"LookupOverflow", testLookupOverflow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			tc.fn(t, s, namespace(t))
		})
	}
}

// namespace returns a random prefix for the keys of one subtest.
func namespace(t *testing.T) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatalf("random namespace: %v", err)
	}
	return "st" + hex.EncodeToString(b[:]) + "#"
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func item(pk, sk string, data string) store.Item {
	return store.Item{Key: store.Key{PK: pk, SK: sk}, Type: "test", Data: []byte(data)}
}

func commit(t *testing.T, s store.Store, writes ...store.Write) {
	t.Helper()
	if err := s.Commit(ctxT(t), writes); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// commitAll commits writes in chunks of store.MaxCommitWrites.
func commitAll(t *testing.T, s store.Store, writes []store.Write) {
	t.Helper()
	for len(writes) > 0 {
		n := min(len(writes), store.MaxCommitWrites)
		commit(t, s, writes[:n]...)
		writes = writes[n:]
	}
}

func mustGet(t *testing.T, s store.Store, k store.Key) store.Item {
	t.Helper()
	it, err := s.Get(ctxT(t), k)
	if err != nil {
		t.Fatalf("Get(%s): %v", k, err)
	}
	return it
}

func mustAbsent(t *testing.T, s store.Store, k store.Key) {
	t.Helper()
	_, err := s.Get(ctxT(t), k)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(%s) = %v, want ErrNotFound", k, err)
	}
}

func wantVersion(t *testing.T, s store.Store, k store.Key, v int64) {
	t.Helper()
	if got := mustGet(t, s, k).Version; got != v {
		t.Fatalf("Get(%s).Version = %d, want %d", k, got, v)
	}
}

// wantConflict checks that err is a *store.ConflictError for write index i
// on key k.
func wantConflict(t *testing.T, err error, i int, k store.Key) {
	t.Helper()
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	var ce *store.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want *store.ConflictError", err, err)
	}
	if ce.Index != i || ce.Key != k {
		t.Fatalf("ConflictError{Index: %d, Key: %s}, want {Index: %d, Key: %s}", ce.Index, ce.Key, i, k)
	}
}

// sameItem compares everything but the version, treating nil and empty
// Index and Data alike.
func sameItem(a, b store.Item) bool {
	if a.Key != b.Key || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) {
		return false
	}
	for _, n := range append(slices.Clone(store.Indexes), store.Lookups...) {
		if a.Index[n] != b.Index[n] {
			return false
		}
	}
	return true
}

func testGetNotFound(t *testing.T, s store.Store, ns string) {
	mustAbsent(t, s, store.Key{PK: ns + "missing", SK: "x"})
	commit(t, s, store.PutIfAbsent(item(ns+"p", "a", `{}`)))
	mustAbsent(t, s, store.Key{PK: ns + "p", SK: "b"})
	mustAbsent(t, s, store.Key{PK: ns + "q", SK: "a"})
}

func testRoundTrip(t *testing.T, s store.Store, ns string) {
	it := store.Item{
		Key:  store.Key{PK: ns + "p|üñí #1", SK: "s k/2|ä"},
		Type: "expectation",
		Index: map[store.IndexName]store.IndexKey{
			store.GSI1: {PK: ns + "g1", SK: "2026-01-01T00:00:00Z"},
			store.LK1:  {PK: ns + "l1", SK: "z"},
		},
		Data: []byte(`{"a":1,"b":"x\u00e9"}`),
	}
	commit(t, s, store.PutIfAbsent(it))
	got := mustGet(t, s, it.Key)
	if !sameItem(got, it) || got.Version != 1 {
		t.Fatalf("Get = %+v, want %+v with version 1", got, it)
	}
	// Keys that are prefixes of each other stay apart.
	commit(t, s,
		store.PutIfAbsent(item(ns+"a", "bc", `1`)),
		store.PutIfAbsent(item(ns+"ab", "c", `2`)),
	)
	if d := mustGet(t, s, store.Key{PK: ns + "a", SK: "bc"}).Data; string(d) != `1` {
		t.Fatalf("a|bc data = %s", d)
	}
	if d := mustGet(t, s, store.Key{PK: ns + "ab", SK: "c"}).Data; string(d) != `2` {
		t.Fatalf("ab|c data = %s", d)
	}
	// The store keeps its own copy of what was committed.
	mut := item(ns+"m", "1", `{"v":1}`)
	mut.Index = map[store.IndexName]store.IndexKey{store.GSI2: {PK: ns + "g2", SK: "1"}}
	commit(t, s, store.Write{Put: &mut, Cond: store.Cond{Kind: store.IfAbsent}})
	mut.Data[2] = 'X'
	mut.Index[store.GSI2] = store.IndexKey{PK: ns + "other", SK: "1"}
	got = mustGet(t, s, mut.Key)
	if string(got.Data) != `{"v":1}` || got.Index[store.GSI2].PK != ns+"g2" {
		t.Fatalf("stored item changed with the caller's copy: %+v", got)
	}
}

func testIfAbsent(t *testing.T, s store.Store, ns string) {
	k := store.Key{PK: ns + "p", SK: "a"}
	commit(t, s, store.PutIfAbsent(item(k.PK, k.SK, `{"n":1}`)))
	wantVersion(t, s, k, 1)

	err := s.Commit(ctxT(t), []store.Write{store.PutIfAbsent(item(k.PK, k.SK, `{"n":2}`))})
	wantConflict(t, err, 0, k)

	// The failing write is named by its position.
	other := store.Key{PK: ns + "p", SK: "b"}
	err = s.Commit(ctxT(t), []store.Write{
		store.PutIfAbsent(item(other.PK, other.SK, `{}`)),
		store.PutIfAbsent(item(k.PK, k.SK, `{"n":3}`)),
	})
	wantConflict(t, err, 1, k)
	mustAbsent(t, s, other)
	if got := mustGet(t, s, k); string(got.Data) != `{"n":1}` || got.Version != 1 {
		t.Fatalf("item changed by failed creates: %+v", got)
	}
}

func testIfVersion(t *testing.T, s store.Store, ns string) {
	k := store.Key{PK: ns + "p", SK: "a"}
	commit(t, s, store.PutIfAbsent(item(k.PK, k.SK, `{"n":1}`)))
	for v := int64(1); v <= 3; v++ {
		commit(t, s, store.PutIfVersion(item(k.PK, k.SK, fmt.Sprintf(`{"n":%d}`, v+1)), v))
		wantVersion(t, s, k, v+1)
	}
	err := s.Commit(ctxT(t), []store.Write{store.PutIfVersion(item(k.PK, k.SK, `{"stale":true}`), 2)})
	wantConflict(t, err, 0, k)
	err = s.Commit(ctxT(t), []store.Write{store.PutIfVersion(item(k.PK, k.SK, `{"ahead":true}`), 9)})
	wantConflict(t, err, 0, k)
	if got := mustGet(t, s, k); got.Version != 4 || string(got.Data) != `{"n":4}` {
		t.Fatalf("after stale CAS: %+v", got)
	}
	missing := store.Key{PK: ns + "p", SK: "missing"}
	err = s.Commit(ctxT(t), []store.Write{store.PutIfVersion(item(missing.PK, missing.SK, `{}`), 1)})
	wantConflict(t, err, 0, missing)
	mustAbsent(t, s, missing)
}

func testUnconditional(t *testing.T, s store.Store, ns string) {
	k := store.Key{PK: ns + "p", SK: "a"}
	blind := func(data string) store.Write {
		it := item(k.PK, k.SK, data)
		return store.Write{Put: &it}
	}
	commit(t, s, blind(`{"n":1}`))
	wantVersion(t, s, k, 1)
	commit(t, s, blind(`{"n":2}`))
	if got := mustGet(t, s, k); got.Version != 2 || string(got.Data) != `{"n":2}` {
		t.Fatalf("after blind overwrite: %+v", got)
	}
}

func testDelete(t *testing.T, s store.Store, ns string) {
	k := store.Key{PK: ns + "p", SK: "a"}
	del := func(c store.Cond) store.Write { return store.Write{Delete: &k, Cond: c} }

	// Unconditional delete of an existing and of a missing item.
	commit(t, s, store.PutIfAbsent(item(k.PK, k.SK, `{}`)))
	commit(t, s, del(store.Cond{}))
	mustAbsent(t, s, k)
	commit(t, s, del(store.Cond{}))

	// Versioned delete: stale and missing conflict, current succeeds.
	commit(t, s, store.PutIfAbsent(item(k.PK, k.SK, `{}`)))
	wantVersion(t, s, k, 1)
	commit(t, s, store.PutIfVersion(item(k.PK, k.SK, `{"n":2}`), 1))
	err := s.Commit(ctxT(t), []store.Write{del(store.Cond{Kind: store.IfVersion, Version: 1})})
	wantConflict(t, err, 0, k)
	wantVersion(t, s, k, 2)
	commit(t, s, del(store.Cond{Kind: store.IfVersion, Version: 2}))
	mustAbsent(t, s, k)
	err = s.Commit(ctxT(t), []store.Write{del(store.Cond{Kind: store.IfVersion, Version: 2})})
	wantConflict(t, err, 0, k)

	// A delete conditional on absence (a Tx deleting what it read as
	// absent) succeeds as a no-op on a missing item.
	commit(t, s, del(store.Cond{Kind: store.IfAbsent}))
	mustAbsent(t, s, k)

	// A deleted item is created afresh, at version 1.
	commit(t, s, store.PutIfAbsent(item(k.PK, k.SK, `{"again":true}`)))
	wantVersion(t, s, k, 1)
	err = s.Commit(ctxT(t), []store.Write{del(store.Cond{Kind: store.IfAbsent})})
	wantConflict(t, err, 0, k)
	wantVersion(t, s, k, 1)
}

func testCommitAtomic(t *testing.T, s store.Store, ns string) {
	a := store.Key{PK: ns + "p", SK: "a"}
	b := store.Key{PK: ns + "p", SK: "b"}
	c := store.Key{PK: ns + "p", SK: "c"}
	d := store.Key{PK: ns + "q", SK: "d"}
	commit(t, s,
		store.PutIfAbsent(item(a.PK, a.SK, `{"a":1}`)),
		store.PutIfAbsent(item(b.PK, b.SK, `{"b":1}`)),
	)
	wantVersion(t, s, a, 1)
	wantVersion(t, s, b, 1)

	// The last write fails: the update, the delete and the create before
	// it are not applied.
	err := s.Commit(ctxT(t), []store.Write{
		store.PutIfVersion(item(a.PK, a.SK, `{"a":2}`), 1),
		{Delete: &b, Cond: store.Cond{Kind: store.IfVersion, Version: 1}},
		store.PutIfAbsent(item(d.PK, d.SK, `{}`)),
		store.PutIfVersion(item(c.PK, c.SK, `{}`), 1),
	})
	wantConflict(t, err, 3, c)
	if got := mustGet(t, s, a); got.Version != 1 || string(got.Data) != `{"a":1}` {
		t.Fatalf("a changed by a failed commit: %+v", got)
	}
	wantVersion(t, s, b, 1)
	mustAbsent(t, s, c)
	mustAbsent(t, s, d)
	page, err := s.Query(ctxT(t), store.Query{PK: ns + "p"})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("Query after failed commit = %d items, %v; want 2", len(page.Items), err)
	}

	// The same commit with the condition met applies every write.
	commit(t, s,
		store.PutIfVersion(item(a.PK, a.SK, `{"a":2}`), 1),
		store.Write{Delete: &b, Cond: store.Cond{Kind: store.IfVersion, Version: 1}},
		store.PutIfAbsent(item(d.PK, d.SK, `{}`)),
		store.PutIfAbsent(item(c.PK, c.SK, `{}`)),
	)
	wantVersion(t, s, a, 2)
	mustAbsent(t, s, b)
	wantVersion(t, s, c, 1)
	wantVersion(t, s, d, 1)
}

func testVersionAssigned(t *testing.T, s store.Store, ns string) {
	k := store.Key{PK: ns + "p", SK: "a"}
	it := item(k.PK, k.SK, `{}`)
	it.Version = 42
	commit(t, s, store.PutIfAbsent(it))
	wantVersion(t, s, k, 1)
	it.Version = 99
	commit(t, s, store.PutIfVersion(it, 1))
	wantVersion(t, s, k, 2)
	it.Version = -5
	commit(t, s, store.Write{Put: &it})
	wantVersion(t, s, k, 3)
}

func testCommitInvalid(t *testing.T, s store.Store, ns string) {
	if err := s.Commit(ctxT(t), nil); err != nil {
		t.Fatalf("empty Commit = %v, want nil", err)
	}
	k := store.Key{PK: ns + "p", SK: "a"}
	it := item(k.PK, k.SK, `{}`)
	tooMany := make([]store.Write, store.MaxCommitWrites+1)
	for i := range tooMany {
		tooMany[i] = store.PutIfAbsent(item(ns+"many", fmt.Sprintf("%04d", i), `{}`))
	}
	cases := map[string][]store.Write{
		"neither put nor delete": {{Cond: store.Cond{Kind: store.IfAbsent}}},
		"both put and delete":    {{Put: &it, Delete: &k}},
		"duplicate key":          {store.PutIfAbsent(it), {Delete: &k}},
		"empty partition key":    {store.PutIfAbsent(item("", "a", `{}`))},
		"empty sort key":         {store.PutIfAbsent(item(ns+"p", "", `{}`))},
		"too many writes":        tooMany,
	}
	for name, writes := range cases {
		err := s.Commit(ctxT(t), writes)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: Commit = %v, want ErrInvalid", name, err)
		}
	}
	mustAbsent(t, s, k)
	mustAbsent(t, s, store.Key{PK: ns + "many", SK: "0000"})
}

// collect pages through q and returns every item in order, checking that no
// page exceeds the limit. Pages may be short (DynamoDB stops a page at 1 MB),
// and the last page may be empty.
func collect(t *testing.T, s store.Store, q store.Query) []store.Item {
	t.Helper()
	var out []store.Item
	for pages := 0; ; pages++ {
		if pages > 10000 {
			t.Fatalf("pagination does not end")
		}
		page, err := s.Query(ctxT(t), q)
		if err != nil {
			t.Fatalf("Query(%+v): %v", q, err)
		}
		limit := q.Limit
		if limit == 0 {
			limit = 100
		}
		if len(page.Items) > limit {
			t.Fatalf("page of %d items exceeds limit %d", len(page.Items), limit)
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out
		}
		q.After = page.Next
	}
}

func sortKeys(items []store.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SK
	}
	return out
}

func wantKeys(t *testing.T, what string, got []store.Item, want []string) {
	t.Helper()
	if g := sortKeys(got); !slices.Equal(g, want) {
		t.Fatalf("%s: got sort keys %q, want %q", what, g, want)
	}
}

func testQueryTable(t *testing.T, s store.Store, ns string) {
	pk := ns + "p"
	var sks []string
	var writes []store.Write
	for i := range 10 {
		sks = append(sks, fmt.Sprintf("item#%02d", i))
	}
	sks = append(sks, "item", "itemz", "other#1", "a")
	for _, sk := range sks {
		writes = append(writes, store.PutIfAbsent(item(pk, sk, `{}`)))
	}
	// Neighbouring partitions, including one whose key extends pk.
	writes = append(writes,
		store.PutIfAbsent(item(pk+"x", "item#00", `{}`)),
		store.PutIfAbsent(item(ns+"o", "item#00", `{}`)),
		store.PutIfAbsent(item(ns+"q", "item#00", `{}`)),
	)
	commit(t, s, writes...)
	slices.Sort(sks)
	rev := func(in []string) []string { out := slices.Clone(in); slices.Reverse(out); return out }
	itemNN := func(from, to int) []string {
		var out []string
		for i := from; i <= to; i++ {
			out = append(out, fmt.Sprintf("item#%02d", i))
		}
		return out
	}

	all := collect(t, s, store.Query{PK: pk})
	wantKeys(t, "whole partition", all, sks)
	for _, it := range all {
		if it.PK != pk || it.Version != 1 || it.Type != "test" {
			t.Fatalf("partition query returned %+v", it)
		}
	}
	wantKeys(t, "descending", collect(t, s, store.Query{PK: pk, Descending: true}), rev(sks))
	wantKeys(t, "prefix", collect(t, s, store.Query{PK: pk, SKPrefix: "item#"}), itemNN(0, 9))
	wantKeys(t, "prefix descending", collect(t, s, store.Query{PK: pk, SKPrefix: "item#", Descending: true}), rev(itemNN(0, 9)))
	wantKeys(t, "up to", collect(t, s, store.Query{PK: pk, SKUpTo: "item#03"}), []string{"a", "item", "item#00", "item#01", "item#02", "item#03"})
	wantKeys(t, "prefix and up to", collect(t, s, store.Query{PK: pk, SKPrefix: "item#", SKUpTo: "item#03"}), itemNN(0, 3))
	wantKeys(t, "prefix and up to, between keys", collect(t, s, store.Query{PK: pk, SKPrefix: "item#", SKUpTo: "item#035"}), itemNN(0, 3))
	wantKeys(t, "prefix and up to descending", collect(t, s, store.Query{PK: pk, SKPrefix: "item#", SKUpTo: "item#03", Descending: true}), rev(itemNN(0, 3)))
	wantKeys(t, "up to below prefix", collect(t, s, store.Query{PK: pk, SKPrefix: "item#", SKUpTo: "b"}), nil)
	wantKeys(t, "up to above prefix", collect(t, s, store.Query{PK: pk, SKPrefix: "item#", SKUpTo: "z", Descending: true}), rev(itemNN(0, 9)))
	wantKeys(t, "no match", collect(t, s, store.Query{PK: pk, SKPrefix: "nothing"}), nil)
	wantKeys(t, "missing partition", collect(t, s, store.Query{PK: ns + "missing"}), nil)

	page, err := s.Query(ctxT(t), store.Query{PK: pk, SKPrefix: "item#", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "limit", page.Items, itemNN(0, 2))
	if page.Next == "" {
		t.Fatalf("limited page has no Next")
	}
	page, err = s.Query(ctxT(t), store.Query{PK: pk, SKPrefix: "item#", Limit: 3, After: page.Next})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "limit, second page", page.Items, itemNN(3, 5))
	page, err = s.Query(ctxT(t), store.Query{PK: pk, SKPrefix: "item#", Limit: 3, Descending: true})
	if err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "limit descending", page.Items, []string{"item#09", "item#08", "item#07"})
	page, err = s.Query(ctxT(t), store.Query{PK: pk, Limit: 100})
	if err != nil || len(page.Items) != len(sks) || page.Next != "" {
		t.Fatalf("page holding the whole partition: %d items, Next %q, %v", len(page.Items), page.Next, err)
	}
}

func testQueryPagination(t *testing.T, s store.Store, ns string) {
	const n = 260
	pk := ns + "p"
	var sks []string
	var writes []store.Write
	for i := range n {
		sk := fmt.Sprintf("k#%04d", (i*7919)%n) // not in key order
		sks = append(sks, sk)
		writes = append(writes, store.PutIfAbsent(item(pk, sk, fmt.Sprintf(`{"i":%d}`, i))))
	}
	writes = append(writes, store.PutIfAbsent(item(pk, "j", `{}`)), store.PutIfAbsent(item(pk, "l", `{}`)))
	commitAll(t, s, writes)
	slices.Sort(sks)
	rev := slices.Clone(sks)
	slices.Reverse(rev)

	for _, limit := range []int{0, 37, n} {
		wantKeys(t, fmt.Sprintf("limit %d", limit), collect(t, s, store.Query{PK: pk, SKPrefix: "k#", Limit: limit}), sks)
		wantKeys(t, fmt.Sprintf("limit %d descending", limit), collect(t, s, store.Query{PK: pk, SKPrefix: "k#", Limit: limit, Descending: true}), rev)
	}
	wantKeys(t, "up to, limit 25", collect(t, s, store.Query{PK: pk, SKPrefix: "k#", SKUpTo: "k#0100", Limit: 25}), sks[:101])
	wantKeys(t, "up to, limit 25, descending", collect(t, s, store.Query{PK: pk, SKPrefix: "k#", SKUpTo: "k#0100", Limit: 25, Descending: true}), rev[n-101:])
}

func withIndex(it store.Item, idx map[store.IndexName]store.IndexKey) store.Item {
	it.Index = idx
	return it
}

func testQueryIndexSparse(t *testing.T, s store.Store, ns string) {
	for _, ix := range store.Indexes {
		t.Run(string(ix), func(t *testing.T) {
			ns := ns + string(ix) + "#"
			gpk, gpk2 := ns+"g", ns+"g2"
			ikey := func(pk, sk string) map[store.IndexName]store.IndexKey {
				return map[store.IndexName]store.IndexKey{ix: {PK: pk, SK: sk}}
			}
			// Items in the index under gpk, one under gpk2, items
			// without an index key, and items keyed in the other
			// indexes only.
			var others map[store.IndexName]store.IndexKey
			for _, o := range store.Indexes {
				if o != ix {
					if others == nil {
						others = map[store.IndexName]store.IndexKey{}
					}
					others[o] = store.IndexKey{PK: gpk, SK: "t#00"}
				}
			}
			commit(t, s,
				store.PutIfAbsent(withIndex(item(ns+"a", "1", `{"x":"a"}`), ikey(gpk, "t#03"))),
				store.PutIfAbsent(withIndex(item(ns+"b", "1", `{"x":"b"}`), ikey(gpk, "t#01"))),
				store.PutIfAbsent(withIndex(item(ns+"c", "1", `{"x":"c"}`), ikey(gpk, "t#02"))),
				store.PutIfAbsent(withIndex(item(ns+"d", "1", `{"x":"d"}`), ikey(gpk2, "t#01"))),
				store.PutIfAbsent(withIndex(item(ns+"e", "1", `{}`), ikey(gpk, "u#01"))),
				store.PutIfAbsent(item(ns+"f", "1", `{}`)),
				store.PutIfAbsent(withIndex(item(ns+"g", "1", `{}`), others)),
				store.PutIfAbsent(item(gpk, "t#01", `{"table":true}`)), // same key in the table
			)
			pks := func(items []store.Item) []string {
				out := make([]string, len(items))
				for i, it := range items {
					out[i] = it.PK
				}
				return out
			}
			want := func(what string, q store.Query, wantPKs ...string) {
				t.Helper()
				q.Index = ix
				got := collect(t, s, q)
				for i := range wantPKs {
					wantPKs[i] = ns + wantPKs[i]
				}
				if g := pks(got); !slices.Equal(g, wantPKs) {
					t.Fatalf("%s: got items %q, want %q", what, g, wantPKs)
				}
			}
			want("partition", store.Query{PK: gpk}, "b", "c", "a", "e")
			want("descending", store.Query{PK: gpk, Descending: true}, "e", "a", "c", "b")
			want("prefix", store.Query{PK: gpk, SKPrefix: "t#"}, "b", "c", "a")
			want("up to", store.Query{PK: gpk, SKUpTo: "t#02"}, "b", "c")
			want("up to, descending", store.Query{PK: gpk, SKUpTo: "t#02", Descending: true}, "c", "b")
			want("limit 1", store.Query{PK: gpk, Limit: 1}, "b", "c", "a", "e")
			want("other partition", store.Query{PK: gpk2}, "d")
			got := collect(t, s, store.Query{Index: ix, PK: gpk2})
			if len(got) != 1 || string(got[0].Data) != `{"x":"d"}` || got[0].Version != 1 || got[0].Index[ix] != (store.IndexKey{PK: gpk2, SK: "t#01"}) {
				t.Fatalf("index query item = %+v", got)
			}

			// Removing the index key takes the item out of the index.
			commit(t, s, store.PutIfVersion(item(ns+"c", "1", `{}`), 1))
			want("after removing c", store.Query{PK: gpk}, "b", "a", "e")
			// Changing it moves the item.
			commit(t, s, store.PutIfVersion(withIndex(item(ns+"a", "1", `{}`), ikey(gpk, "t#00")), 1))
			want("after re-sorting a", store.Query{PK: gpk}, "a", "b", "e")
			commit(t, s, store.PutIfVersion(withIndex(item(ns+"b", "1", `{}`), ikey(gpk2, "t#00")), 1))
			want("after moving b, old partition", store.Query{PK: gpk}, "a", "e")
			want("after moving b, new partition", store.Query{PK: gpk2}, "b", "d")
			// Adding one puts it in.
			commit(t, s, store.PutIfVersion(withIndex(item(ns+"f", "1", `{}`), ikey(gpk, "t#05")), 1))
			want("after adding f", store.Query{PK: gpk}, "a", "f", "e")
			// Deleting the item removes its entry.
			ka := store.Key{PK: ns + "a", SK: "1"}
			commit(t, s, store.Write{Delete: &ka})
			want("after deleting a", store.Query{PK: gpk}, "f", "e")
			// A failed commit leaves the index alone.
			err := s.Commit(ctxT(t), []store.Write{
				store.PutIfVersion(withIndex(item(ns+"e", "1", `{}`), ikey(gpk2, "t#09")), 1),
				store.PutIfAbsent(item(ns+"f", "1", `{}`)),
			})
			wantConflict(t, err, 1, store.Key{PK: ns + "f", SK: "1"})
			want("after failed move", store.Query{PK: gpk}, "f", "e")
			want("after failed move, other partition", store.Query{PK: gpk2}, "b", "d")
		})
	}
}

func testQueryIndexTies(t *testing.T, s store.Store, ns string) {
	const n = 23
	gpk := ns + "g"
	var writes []store.Write
	var want []string
	for i := range n {
		pk := fmt.Sprintf("%sp%02d", ns, (i*5)%n)
		want = append(want, pk)
		sk := "same"
		switch i {
		case 0:
			sk = "before"
		case n - 1:
			sk = "zafter"
		}
		writes = append(writes, store.PutIfAbsent(withIndex(item(pk, "x", `{}`),
			map[store.IndexName]store.IndexKey{store.GSI1: {PK: gpk, SK: sk}, store.GSI2: {PK: gpk, SK: "same"}})))
	}
	commit(t, s, writes...)
	slices.Sort(want)
	for _, ix := range []store.IndexName{store.GSI1, store.GSI2} {
		for _, desc := range []bool{false, true} {
			for _, limit := range []int{3, 22} {
				got := collect(t, s, store.Query{Index: ix, PK: gpk, Limit: limit, Descending: desc})
				var pks []string
				for _, it := range got {
					pks = append(pks, it.PK)
				}
				if len(pks) != n {
					t.Fatalf("%s limit %d desc %v: %d items, want %d", ix, limit, desc, len(pks), n)
				}
				if ix == store.GSI1 {
					first, last := 0, n-1
					if desc {
						first, last = last, first
					}
					if got[first].Index[ix].SK != "before" || got[last].Index[ix].SK != "zafter" {
						t.Fatalf("%s limit %d desc %v: index sort order broken: %q", ix, limit, desc, pks)
					}
				}
				slices.Sort(pks)
				if !slices.Equal(pks, want) {
					t.Fatalf("%s limit %d desc %v: got %q, want each of %q once", ix, limit, desc, pks, want)
				}
			}
		}
	}
}

func testQueryInvalid(t *testing.T, s store.Store, ns string) {
	commit(t, s, store.PutIfAbsent(withIndex(item(ns+"p", "a", `{}`),
		map[store.IndexName]store.IndexKey{store.GSI1: {PK: ns + "g", SK: "a"}})))
	for _, q := range []store.Query{
		{PK: ns + "p", After: "%%% not a token %%%"},
		{PK: ns + "p", After: "x"},
		{Index: store.GSI1, PK: ns + "g", After: "%%% not a token %%%"},
		{PK: ""},
		{Index: "nope", PK: ns + "p"},
	} {
		_, err := s.Query(ctxT(t), q)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Query(%+v) = %v, want ErrInvalid", q, err)
		}
	}
}

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

// RunFeed runs the store.FeedReader contract against stores made by
// newStore, which must implement store.FeedReader (the suite fails
// otherwise). Each subtest first drains and acknowledges whatever the feed
// holds, so a store may be shared between subtests, but no other writer may
// use it while the suite runs. Failures are reported through t.
func RunFeed(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, f store.FeedReader, ns string)
	}{
		{"Images", testFeedImages},
		{"FailedCommitAppendsNothing", testFeedFailedCommit},
		{"Ack", testFeedAck},
		{"Signal", testFeedSignal},
		{"CommitTime", testFeedCommitTime},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			f, ok := s.(store.FeedReader)
			if !ok {
				t.Fatalf("%T does not implement store.FeedReader", s)
			}
			drainFeed(t, f)
			tc.fn(t, s, f, namespace(t))
		})
	}
}

// drainFeed acknowledges everything in the feed.
func drainFeed(t *testing.T, f store.FeedReader) {
	t.Helper()
	for {
		chs, err := f.ReadFeed(ctxT(t), 1000)
		if err != nil {
			t.Fatalf("ReadFeed: %v", err)
		}
		if len(chs) == 0 {
			return
		}
		if err := f.AckFeed(ctxT(t), chs[len(chs)-1].Seq); err != nil {
			t.Fatalf("AckFeed: %v", err)
		}
	}
}

func readAll(t *testing.T, f store.FeedReader) []store.Change {
	t.Helper()
	chs, err := f.ReadFeed(ctxT(t), 10000)
	if err != nil {
		t.Fatalf("ReadFeed: %v", err)
	}
	checkSeqs(t, chs)
	return chs
}

// seqLess orders sequence numbers as decimal numbers of any length.
func seqLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

func checkSeqs(t *testing.T, chs []store.Change) {
	t.Helper()
	for i := range chs {
		if chs[i].Seq == "" {
			t.Fatalf("change %d has no Seq", i)
		}
		if i > 0 && !seqLess(chs[i-1].Seq, chs[i].Seq) {
			t.Fatalf("Seq not strictly increasing: %q then %q", chs[i-1].Seq, chs[i].Seq)
		}
	}
}

// wantChange checks one change: its key, and the versions and data of its
// images, where version 0 means the image must be nil.
func wantChange(t *testing.T, ch store.Change, k store.Key, oldV int64, oldData string, newV int64, newData string) {
	t.Helper()
	if ch.Key != k {
		t.Fatalf("change key %s, want %s", ch.Key, k)
	}
	check := func(what string, img *store.Item, v int64, data string) {
		t.Helper()
		if v == 0 {
			if img != nil {
				t.Fatalf("%s: %s image %+v, want nil", k, what, *img)
			}
			return
		}
		if img == nil {
			t.Fatalf("%s: %s image nil, want version %d", k, what, v)
		}
		if img.Key != k || img.Version != v || string(img.Data) != data || img.Type != "test" {
			t.Fatalf("%s: %s image %+v (data %s), want version %d data %s", k, what, *img, img.Data, v, data)
		}
	}
	check("old", ch.Old, oldV, oldData)
	check("new", ch.New, newV, newData)
	if ch.Type() != "test" {
		t.Fatalf("change Type() = %q", ch.Type())
	}
}

func testFeedImages(t *testing.T, s store.Store, f store.FeedReader, ns string) {
	a := store.Key{PK: ns + "p", SK: "a"}
	b := store.Key{PK: ns + "p", SK: "b"}
	c := store.Key{PK: ns + "p", SK: "c"}
	ga := withIndex(item(a.PK, a.SK, `{"a":1}`), map[store.IndexName]store.IndexKey{store.GSI1: {PK: ns + "g", SK: "1"}})
	commit(t, s,
		store.PutIfAbsent(ga),
		store.PutIfAbsent(item(b.PK, b.SK, `{"b":1}`)),
	)
	commit(t, s,
		store.PutIfVersion(item(a.PK, a.SK, `{"a":2}`), 1),
		store.Write{Delete: &b, Cond: store.Cond{Kind: store.IfVersion, Version: 1}},
		store.Write{Delete: &c}, // absent: no change
	)
	blind := item(c.PK, c.SK, `{"c":1}`)
	commit(t, s, store.Write{Put: &blind})

	chs := readAll(t, f)
	if len(chs) != 5 {
		t.Fatalf("feed holds %d changes, want 5: %+v", len(chs), chs)
	}
	wantChange(t, chs[0], a, 0, "", 1, `{"a":1}`)
	wantChange(t, chs[1], b, 0, "", 1, `{"b":1}`)
	wantChange(t, chs[2], a, 1, `{"a":1}`, 2, `{"a":2}`)
	wantChange(t, chs[3], b, 1, `{"b":1}`, 0, "")
	wantChange(t, chs[4], c, 0, "", 1, `{"c":1}`)
	if got := chs[0].New.Index[store.GSI1]; got != ga.Index[store.GSI1] {
		t.Fatalf("new image index key %+v, want %+v", got, ga.Index[store.GSI1])
	}
	if got := chs[2].Old.Index[store.GSI1]; got != ga.Index[store.GSI1] {
		t.Fatalf("old image index key %+v, want %+v", got, ga.Index[store.GSI1])
	}
	if !chs[2].New.Index[store.GSI1].IsZero() {
		t.Fatalf("new image keeps a removed index key: %+v", chs[2].New.Index)
	}

	// ReadFeed does not consume: reading again returns the same changes,
	// and a limit bounds the batch.
	again, err := f.ReadFeed(ctxT(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(again) != 2 || again[0].Seq != chs[0].Seq || again[1].Seq != chs[1].Seq {
		t.Fatalf("ReadFeed(2) after ReadFeed = %+v, want the first two changes again", again)
	}
}

// testFeedCommitTime: every change carries its commit time (the change
// feed's lag is measured from it), to the second at worst (DynamoDB
// Streams' ApproximateCreationDateTime).
func testFeedCommitTime(t *testing.T, s store.Store, f store.FeedReader, ns string) {
	before := time.Now().Truncate(time.Second)
	commit(t, s, store.PutIfAbsent(item(ns+"p", "a", `{}`)))
	after := time.Now()
	chs := readAll(t, f)
	if len(chs) != 1 {
		t.Fatalf("feed holds %d changes, want 1", len(chs))
	}
	if at := chs[0].At; at.Before(before) || at.After(after) {
		t.Fatalf("change committed between %s and %s carries the time %s", before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
	}
}

func testFeedFailedCommit(t *testing.T, s store.Store, f store.FeedReader, ns string) {
	a := store.Key{PK: ns + "p", SK: "a"}
	commit(t, s, store.PutIfAbsent(item(a.PK, a.SK, `{}`)))
	before := readAll(t, f)
	if len(before) != 1 {
		t.Fatalf("feed holds %d changes, want 1", len(before))
	}
	err := s.Commit(ctxT(t), []store.Write{
		store.PutIfAbsent(item(ns+"p", "new", `{}`)),
		store.PutIfAbsent(item(a.PK, a.SK, `{}`)),
	})
	wantConflict(t, err, 1, a)
	after := readAll(t, f)
	if len(after) != 1 || after[0].Seq != before[0].Seq {
		t.Fatalf("failed commit changed the feed: %+v", after)
	}
	// A change after the failure still follows the earlier one.
	commit(t, s, store.PutIfVersion(item(a.PK, a.SK, `{"n":2}`), 1))
	after = readAll(t, f)
	if len(after) != 2 || after[0].Seq != before[0].Seq {
		t.Fatalf("feed after a later commit: %+v", after)
	}
	wantChange(t, after[1], a, 1, `{}`, 2, `{"n":2}`)
}

func testFeedAck(t *testing.T, s store.Store, f store.FeedReader, ns string) {
	var writes []store.Write
	for i := range 5 {
		writes = append(writes, store.PutIfAbsent(item(ns+"p", fmt.Sprint(i), fmt.Sprintf(`{"i":%d}`, i))))
	}
	commit(t, s, writes[:3]...)
	commit(t, s, writes[3:]...)
	chs := readAll(t, f)
	if len(chs) != 5 {
		t.Fatalf("feed holds %d changes, want 5", len(chs))
	}
	for i, ch := range chs {
		wantChange(t, ch, store.Key{PK: ns + "p", SK: fmt.Sprint(i)}, 0, "", 1, fmt.Sprintf(`{"i":%d}`, i))
	}
	if err := f.AckFeed(ctxT(t), chs[1].Seq); err != nil {
		t.Fatalf("AckFeed: %v", err)
	}
	rest := readAll(t, f)
	if len(rest) != 3 || rest[0].Seq != chs[2].Seq || rest[2].Seq != chs[4].Seq {
		t.Fatalf("after ack of change 1: %+v", rest)
	}
	// Acknowledging an acknowledged position again, or an earlier one, is
	// a no-op.
	for _, seq := range []string{chs[1].Seq, chs[0].Seq} {
		if err := f.AckFeed(ctxT(t), seq); err != nil {
			t.Fatalf("AckFeed(%s) again: %v", seq, err)
		}
	}
	if rest := readAll(t, f); len(rest) != 3 {
		t.Fatalf("repeated ack changed the feed: %d changes", len(rest))
	}
	// Later changes follow the unacknowledged ones.
	commit(t, s, store.PutIfVersion(item(ns+"p", "0", `{"i":"again"}`), 1))
	rest = readAll(t, f)
	if len(rest) != 4 || rest[0].Seq != chs[2].Seq || !seqLess(chs[4].Seq, rest[3].Seq) {
		t.Fatalf("after a later commit: %+v", rest)
	}
	if err := f.AckFeed(ctxT(t), rest[3].Seq); err != nil {
		t.Fatalf("AckFeed: %v", err)
	}
	if rest := readAll(t, f); len(rest) != 0 {
		t.Fatalf("feed not drained after acking the last change: %+v", rest)
	}
	// Seq keeps growing after the feed was drained.
	commit(t, s, store.PutIfAbsent(item(ns+"p", "late", `{}`)))
	late := readAll(t, f)
	if len(late) != 1 || !seqLess(rest[3].Seq, late[0].Seq) {
		t.Fatalf("change after drain: %+v", late)
	}
}

func testFeedSignal(t *testing.T, s store.Store, f store.FeedReader, ns string) {
	sig := f.FeedSignal()
	if sig == nil {
		t.Fatalf("FeedSignal returned nil")
	}
	// Clear a pending signal from before.
	select {
	case <-sig:
	default:
	}
	commit(t, s, store.PutIfAbsent(item(ns+"p", "a", `{}`)))
	select {
	case <-sig:
	case <-time.After(5 * time.Second):
		t.Fatalf("no signal after a commit")
	}
	// Signals coalesce: many commits never block the committer.
	for i := range 5 {
		commit(t, s, store.PutIfAbsent(item(ns+"p", fmt.Sprint(i), `{}`)))
	}
	select {
	case <-sig:
	case <-time.After(5 * time.Second):
		t.Fatalf("no signal after several commits")
	}
}

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
