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
		{"PutAside", testPutAside},
		{"LookupIn", testLookupIn},
		{"CheckWrite", testCheckWrite},
		{"UpdateCheck", testUpdateCheck},
		{"LookupOverflow", testLookupOverflow},
		{"Expiry", testExpiry},
		{"Claim", testClaim},
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
