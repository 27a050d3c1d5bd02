package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/store"
)

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
