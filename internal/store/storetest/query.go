package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agentclock/clockwork/internal/store"
)

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
