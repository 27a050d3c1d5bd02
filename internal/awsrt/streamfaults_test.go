package awsrt

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentclock/clockwork/internal/store"
)

// listFeed is a FeedReader over a fixed list of changes.
type listFeed struct {
	chs   []store.Change
	acked string
}

func (l *listFeed) ReadFeed(_ context.Context, limit int) ([]store.Change, error) {
	var out []store.Change
	for _, ch := range l.chs {
		if l.acked == "" || seqAfter(ch.Seq, l.acked) {
			out = append(out, ch)
		}
	}
	return out[:min(limit, len(out))], nil
}
func (l *listFeed) AckFeed(_ context.Context, upTo string) error { l.acked = upTo; return nil }
func (l *listFeed) FeedSignal() <-chan struct{}                  { return nil }

// TestStreamFaults checks the injected delivery faults keep what Streams
// promise (each item's order; every record delivered until acknowledged)
// while breaking what they do not.
func TestStreamFaults(t *testing.T) {
	ctx := context.Background()
	var chs []store.Change
	for i := 1; i <= 40; i++ {
		chs = append(chs, store.Change{Seq: fmt.Sprint(100 + i), Key: store.Key{PK: "p", SK: fmt.Sprint(i % 4)}})
	}
	inner := &listFeed{chs: chs}
	ff := newFaultyFeed(inner, StreamFaults{Reorder: true, Duplicate: 0.2, Cut: 0.5, Seed: 7})
	seen := map[string]int{}
	for round := 0; round < 200 && inner.acked != "140"; round++ {
		got, _ := ff.ReadFeed(ctx, 10)
		last := map[store.Key]string{}
		for _, ch := range got {
			if prev, ok := last[ch.Key]; ok && seqAfter(prev, ch.Seq) {
				t.Fatalf("item %s: %s after %s", ch.Key, ch.Seq, prev)
			}
			last[ch.Key] = ch.Seq
			seen[ch.Seq]++
		}
		_ = ff.AckFeed(ctx, got[len(got)-1].Seq)
	}
	if inner.acked != "140" {
		t.Fatalf("acknowledged up to %q, want 140", inner.acked)
	}
	for _, ch := range chs {
		if seen[ch.Seq] == 0 {
			t.Fatalf("record %s never delivered", ch.Seq)
		}
	}
	c := ff.snapshot()
	if c.Reordered == 0 || c.Duplicated == 0 || c.Cut == 0 {
		t.Fatalf("faults %+v: want each kind", c)
	}
}
