package bolt

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/storetest"
	"go.etcd.io/bbolt"
)

func openTest(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func newStore(t *testing.T) store.Store {
	return openTest(t, filepath.Join(t.TempDir(), "store.db"), Options{})
}

func TestContract(t *testing.T) { storetest.Run(t, newStore) }

func TestFeedContract(t *testing.T) { storetest.RunFeed(t, newStore) }

func put(pk, sk, data string, idx map[store.IndexName]store.IndexKey) store.Item {
	return store.Item{Key: store.Key{PK: pk, SK: sk}, Type: "t", Index: idx, Data: []byte(data)}
}

func mustCommit(t testing.TB, s store.Store, writes ...store.Write) {
	t.Helper()
	if err := s.Commit(context.Background(), writes); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func TestReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	g1 := map[store.IndexName]store.IndexKey{store.GSI1: {PK: "g", SK: "1"}}
	mustCommit(t, s, store.PutIfAbsent(put("p", "a", `{"a":1}`, g1)), store.PutIfAbsent(put("p", "b", `{}`, nil)))
	mustCommit(t, s, store.PutIfVersion(put("p", "a", `{"a":2}`, g1), 1))
	before, err := s.ReadFeed(ctx, 100)
	if err != nil || len(before) != 3 {
		t.Fatalf("ReadFeed = %d, %v", len(before), err)
	}
	if err := s.AckFeed(ctx, before[0].Seq); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openTest(t, path, Options{})
	it, err := s.Get(ctx, store.Key{PK: "p", SK: "a"})
	if err != nil || it.Version != 2 || string(it.Data) != `{"a":2}` {
		t.Fatalf("Get after reopen = %+v, %v", it, err)
	}
	page, err := s.Query(ctx, store.Query{Index: store.GSI1, PK: "g"})
	if err != nil || len(page.Items) != 1 || page.Items[0].SK != "a" {
		t.Fatalf("index after reopen = %+v, %v", page, err)
	}
	after, err := s.ReadFeed(ctx, 100)
	if err != nil || len(after) != 2 || after[0].Seq != before[1].Seq || after[1].Seq != before[2].Seq {
		t.Fatalf("feed after reopen = %+v, %v", after, err)
	}
	mustCommit(t, s, store.PutIfAbsent(put("p", "c", `{}`, nil)))
	after, err = s.ReadFeed(ctx, 100)
	if err != nil || len(after) != 3 || after[2].Seq <= before[2].Seq {
		t.Fatalf("feed after reopen and commit = %+v, %v", after, err)
	}
	if len(after[2].Seq) != 20 {
		t.Fatalf("Seq %q is not 20 digits", after[2].Seq)
	}
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	s, err := Open(filepath.Join(t.TempDir(), "store.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	k := store.Key{PK: "p", SK: "a"}
	if _, err := s.Get(ctx, k); !errors.Is(err, ErrClosed) {
		t.Errorf("Get = %v", err)
	}
	if _, err := s.Query(ctx, store.Query{PK: "p"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Query = %v", err)
	}
	if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(put("p", "a", `{}`, nil))}); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit = %v", err)
	}
	if _, err := s.ReadFeed(ctx, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("ReadFeed = %v", err)
	}
	if err := s.AckFeed(ctx, "1"); !errors.Is(err, ErrClosed) {
		t.Errorf("AckFeed = %v", err)
	}
	// Bypassing the flag still fails cleanly inside bbolt.
	s.closed.Store(false)
	if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(put("p", "a", `{}`, nil))}); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit on closed db = %v", err)
	}
	if _, err := s.Get(ctx, k); !errors.Is(err, ErrClosed) {
		t.Errorf("Get on closed db = %v", err)
	}
}

func TestCloseWithConcurrentCommits(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "store.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 16)
	for g := range 16 {
		go func() {
			var err error
			for i := 0; err == nil; i++ {
				err = s.Commit(context.Background(), []store.Write{store.PutIfAbsent(put("p", fmt.Sprintf("%d-%d", g, i), `{}`, nil))})
			}
			done <- err
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Errorf("commit during Close = %v, want ErrClosed", err)
		}
	}
}

func TestInvalid(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "store.db"), Options{NoSync: true})
	if _, err := s.ReadFeed(ctx, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ReadFeed(0) = %v", err)
	}
	for _, seq := range []string{"", "abc", "-1", "1e3", "123456789012345678901", "99999999999999999999"} {
		if err := s.AckFeed(ctx, seq); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("AckFeed(%q) = %v", seq, err)
		}
	}
	if _, err := s.Query(ctx, store.Query{PK: "p", Limit: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("negative limit: %v", err)
	}
	long := strings.Repeat("x", store.MaxPKBytes+1)
	bad := []store.Item{
		put(long, "a", `{}`, nil),
		put("p", strings.Repeat("x", store.MaxSKBytes+1), `{}`, nil),
		put("p", "a", `{}`, map[store.IndexName]store.IndexKey{store.GSI1: {PK: long, SK: "a"}}),
		put("p", "a", `{}`, map[store.IndexName]store.IndexKey{store.GSI1: {PK: "g", SK: ""}}),
		put("p", "a", `{}`, map[store.IndexName]store.IndexKey{"gsi9": {PK: "g", SK: "a"}}),
		put("p", "a", strings.Repeat("x", store.MaxItemBytes), nil),
		{Key: store.Key{PK: "p", SK: "a"}, Type: "\xff"},
	}
	for i, it := range bad {
		if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(it)}); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("bad item %d: %v", i, err)
		}
	}
	if err := s.Commit(ctx, []store.Write{{Put: &bad[0], Cond: store.Cond{Kind: 7}}}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("unknown cond kind: %v", err)
	}
	if _, err := s.Get(ctx, store.Key{PK: "p"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("Get with empty SK: %v", err)
	}
	// A token of another partition is rejected.
	var writes []store.Write
	for i := range 3 {
		writes = append(writes, store.PutIfAbsent(put("p", fmt.Sprint(i), `{}`, nil)), store.PutIfAbsent(put("q", fmt.Sprint(i), `{}`, nil)))
	}
	mustCommit(t, s, writes...)
	page, err := s.Query(ctx, store.Query{PK: "p", Limit: 1})
	if err != nil || page.Next == "" {
		t.Fatalf("Query = %+v, %v", page, err)
	}
	if _, err := s.Query(ctx, store.Query{PK: "q", After: page.Next}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("foreign token: %v", err)
	}
	// A zero index key and a canceled context.
	mustCommit(t, s, store.PutIfAbsent(put("z", "a", `{}`, map[store.IndexName]store.IndexKey{store.GSI2: {}})))
	if it, err := s.Get(ctx, store.Key{PK: "z", SK: "a"}); err != nil || it.Index != nil {
		t.Errorf("zero index key stored: %+v, %v", it, err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Get(cctx, store.Key{PK: "z", SK: "a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Get with canceled ctx: %v", err)
	}
}

func TestLimitClamp(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "store.db"), Options{NoSync: true})
	var writes []store.Write
	for i := range store.MaxLimit + 1 {
		writes = append(writes, store.PutIfAbsent(put("p", fmt.Sprintf("%05d", i), `{}`, nil)))
		if len(writes) == store.MaxCommitWrites {
			mustCommit(t, s, writes...)
			writes = nil
		}
	}
	mustCommit(t, s, writes...)
	page, err := s.Query(ctx, store.Query{PK: "p", Limit: 5000})
	if err != nil || len(page.Items) != store.MaxLimit || page.Next == "" {
		t.Fatalf("Limit 5000: %d items, next %q, %v", len(page.Items), page.Next, err)
	}
	page, err = s.Query(ctx, store.Query{PK: "p", Limit: 5000, After: page.Next})
	if err != nil || len(page.Items) != 1 || page.Next != "" {
		t.Fatalf("second page: %d items, next %q, %v", len(page.Items), page.Next, err)
	}
}

// TestKeyEncodingModel checks queries over keys made of the bytes that
// matter to the encoding (0x00, 0x01, 0xFF) against a brute-force model.
func TestKeyEncodingModel(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, filepath.Join(t.TempDir(), "store.db"), Options{NoSync: true})
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{0x00, 0x01, 'a', 0xFF}
	randStr := func(min int) string {
		n := min + rng.IntN(4-min)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	type row struct{ key, ixk store.Key }
	model := map[store.Key]store.Key{}
	for range 400 {
		k := store.Key{PK: randStr(1), SK: randStr(1)}
		ixk := store.Key{PK: randStr(1), SK: randStr(1)}
		it := put(k.PK, k.SK, `{}`, map[store.IndexName]store.IndexKey{store.GSI1: store.IndexKey(ixk)})
		mustCommit(t, s, store.Write{Put: &it})
		model[k] = ixk
	}
	var rows []row
	for k, ixk := range model {
		rows = append(rows, row{k, ixk})
	}
	for q := range 600 {
		index := q%2 == 1
		r0 := rows[rng.IntN(len(rows))]
		query := store.Query{PK: r0.key.PK, Limit: 1 + rng.IntN(5), Descending: rng.IntN(2) == 0}
		if index {
			query.Index, query.PK = store.GSI1, r0.ixk.PK
		}
		if rng.IntN(2) == 0 {
			query.SKPrefix = randStr(0)
		}
		if rng.IntN(2) == 0 {
			query.SKUpTo = randStr(1)
		}
		var want []row
		for _, r := range rows {
			pk, sk := r.key.PK, r.key.SK
			if index {
				pk, sk = r.ixk.PK, r.ixk.SK
			}
			if pk == query.PK && strings.HasPrefix(sk, query.SKPrefix) && (query.SKUpTo == "" || sk <= query.SKUpTo) {
				want = append(want, r)
			}
		}
		slices.SortFunc(want, func(a, b row) int {
			c := 0
			if index {
				c = strings.Compare(a.ixk.SK, b.ixk.SK)
				if c == 0 {
					c = strings.Compare(a.key.PK, b.key.PK)
				}
			}
			if c == 0 {
				c = strings.Compare(a.key.SK, b.key.SK)
			}
			if query.Descending {
				c = -c
			}
			return c
		})
		var got []store.Key
		for {
			page, err := s.Query(ctx, query)
			if err != nil {
				t.Fatalf("Query(%#v): %v", query, err)
			}
			for _, it := range page.Items {
				got = append(got, it.Key)
			}
			if page.Next == "" {
				break
			}
			query.After = page.Next
		}
		wantKeys := make([]store.Key, len(want))
		for i, r := range want {
			wantKeys[i] = r.key
		}
		if !slices.Equal(got, wantKeys) {
			t.Fatalf("Query(%#v):\n got %q\nwant %q", query, got, wantKeys)
		}
	}
}

func TestFeedSignalDoesNotBlock(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "store.db"), Options{NoSync: true})
	for i := range 10 {
		mustCommit(t, s, store.PutIfAbsent(put("p", fmt.Sprint(i), `{}`, nil)))
	}
	if n := len(s.FeedSignal()); n != 1 {
		t.Fatalf("signal channel holds %d, want 1", n)
	}
	// A commit that appends nothing does not signal.
	<-s.FeedSignal()
	k := store.Key{PK: "p", SK: "missing"}
	mustCommit(t, s, store.Write{Delete: &k})
	if n := len(s.FeedSignal()); n != 0 {
		t.Fatalf("no-op commit signalled")
	}
}

// ---- benchmarks ----

const queryPartition = "target"

// TestOpenRefusesOldLayout: a file from before lookup indexes (entries in
// the indexes gsi3/gsi4, no lookup entries) is refused with ErrOldLayout
// rather than opened with lookups that would miss its items.
func TestOpenRefusesOldLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("index:gsi4"))
		if err != nil {
			return err
		}
		return b.Put([]byte("TK#a#t\x00\x01e\x00\x01A#a\x00\x01E#e"), []byte("A#a\x00\x01E#e"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(path, Options{}); !errors.Is(err, ErrOldLayout) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open of an old file = %v, want ErrOldLayout", err)
	}
	// An empty old bucket (nothing indexed) is harmless.
	empty := filepath.Join(t.TempDir(), "empty.db")
	db, err = bbolt.Open(empty, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("index:gsi3")); return err })
	_ = db.Close()
	s, err := Open(empty, Options{})
	if err != nil {
		t.Fatalf("Open with an empty old bucket: %v", err)
	}
	_ = s.Close()
}

// TestFeedStall checks the wait FeedLagLimit puts before a commit: none
// within the limit, in proportion to the excess beyond it, MaxFeedStall per
// write at twice the limit and beyond, MaxCommitStall at most, none again
// once the feed is acknowledged, the backlog counted again at open, and
// none without a limit.
func TestFeedStall(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "store.db")
	s, err := Open(path, Options{NoSync: true, FeedLagLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	put := func(i int) {
		t.Helper()
		it := store.Item{Key: store.Key{PK: "p", SK: fmt.Sprintf("%03d", i)}, Type: "t", Data: []byte(`{}`)}
		if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(it)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		put(i)
	}
	if d := s.feedStall(1); d != 0 {
		t.Fatalf("stall at the limit (10 changes) = %v, want 0", d)
	}
	for i := 10; i < 15; i++ {
		put(i)
	}
	if d := s.feedStall(1); d != MaxFeedStall/2 {
		t.Fatalf("stall at 15 changes = %v, want %v", d, MaxFeedStall/2)
	}
	for i := 15; i < 40; i++ {
		put(i)
	}
	if d := s.feedStall(1); d != MaxFeedStall {
		t.Fatalf("stall at 40 changes = %v, want the cap %v", d, MaxFeedStall)
	}
	if d := s.feedStall(3); d != 3*MaxFeedStall {
		t.Fatalf("stall of a commit of 3 writes at 40 changes = %v, want %v", d, 3*MaxFeedStall)
	}
	if d := s.feedStall(1000); d != MaxCommitStall {
		t.Fatalf("stall of a commit of 1,000 writes = %v, want the cap %v", d, MaxCommitStall)
	}
	changes, err := s.ReadFeed(ctx, 25)
	if err != nil || len(changes) != 25 {
		t.Fatalf("ReadFeed = %d, %v", len(changes), err)
	}
	if err := s.AckFeed(ctx, changes[len(changes)-1].Seq); err != nil {
		t.Fatal(err)
	}
	if d := s.feedStall(1); d != MaxFeedStall/2 {
		t.Fatalf("stall with 15 unacknowledged = %v, want %v", d, MaxFeedStall/2)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, path, Options{NoSync: true, FeedLagLimit: 10})
	if d := s.feedStall(1); d != MaxFeedStall/2 {
		t.Fatalf("after reopening, stall = %v, want %v (15 unacknowledged)", d, MaxFeedStall/2)
	}
	changes, err = s.ReadFeed(ctx, 100)
	if err != nil || len(changes) != 15 {
		t.Fatalf("ReadFeed after reopening = %d, %v", len(changes), err)
	}
	if err := s.AckFeed(ctx, changes[len(changes)-1].Seq); err != nil {
		t.Fatal(err)
	}
	if d := s.feedStall(1); d != 0 {
		t.Fatalf("stall with the feed acknowledged = %v, want 0", d)
	}
	off := openTest(t, filepath.Join(t.TempDir(), "off.db"), Options{NoSync: true})
	for i := 0; i < 30; i++ {
		it := store.Item{Key: store.Key{PK: "p", SK: fmt.Sprintf("%03d", i)}, Type: "t", Data: []byte(`{}`)}
		if err := off.Commit(ctx, []store.Write{store.PutIfAbsent(it)}); err != nil {
			t.Fatal(err)
		}
	}
	if d := off.feedStall(1); d != 0 {
		t.Fatalf("stall without a limit = %v, want 0", d)
	}
}

// TestExpireNowDeletesExpiredItemsOffTheFeed: the expirer deletes an
// expired item with its index and expiry entries, counts it by type, and
// adds nothing to the change feed; a live item and an item written again
// with a later ExpiresAt stay.
func TestExpireNowDeletesExpiredItemsOffTheFeed(t *testing.T) {
	counts := map[string]int{}
	s, err := Open(filepath.Join(t.TempDir(), "x.db"), Options{ExpiryInterval: -1, OnExpired: func(typ string, n int) { counts[typ] += n }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	soon := time.Now().Add(-time.Second).Unix()
	mk := func(sk string, exp int64) store.Item {
		return store.Item{Key: store.Key{PK: "p", SK: sk}, Type: "rec", Data: []byte(`{}`), ExpiresAt: exp,
			Index: map[store.IndexName]store.IndexKey{store.GSI1: {PK: "ix", SK: sk}}}
	}
	if err := s.Commit(ctx, []store.Write{store.PutIfAbsent(mk("gone", soon)), store.PutIfAbsent(mk("live", time.Now().Add(time.Hour).Unix())), store.PutIfAbsent(mk("moved", soon))}); err != nil {
		t.Fatal(err)
	}
	// "moved" is written again (blind) with no expiry: its old expiry entry goes.
	moved := mk("moved", 0)
	if err := s.Commit(ctx, []store.Write{{Put: &moved}}); err != nil {
		t.Fatal(err)
	}
	before := s.appended.Load()
	n, err := s.ExpireNow()
	if err != nil || n != 1 || counts["rec"] != 1 {
		t.Fatalf("ExpireNow = %d, %v; counts %v; want 1 rec", n, err, counts)
	}
	if s.appended.Load() != before {
		t.Fatal("the expiry appended changes to the feed")
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketItems).Get(tableKey(nil, store.Key{PK: "p", SK: "gone"})) != nil {
			t.Error("the expired item is still in the file")
		}
		if n := tx.Bucket(bucketIndex[indexSlot(store.GSI1)]).Stats().KeyN; n != 2 {
			t.Errorf("index entries = %d, want 2 (live, moved)", n)
		}
		if n := tx.Bucket(bucketExpiry).Stats().KeyN; n != 1 {
			t.Errorf("expiry entries = %d, want 1 (live)", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.ExpireNow(); n != 0 {
		t.Fatalf("a second run deleted %d", n)
	}
	if s.DiskBytes() <= 0 {
		t.Fatal("DiskBytes is not the file's size")
	}
}
