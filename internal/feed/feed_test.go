package feed_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
	"github.com/agentclock/clockwork/internal/timers"
	"github.com/agentclock/clockwork/internal/watcher"
)

// TestDuplicateAndOutOfOrderChanges replays the feed of an expectation's
// life (raised, past due, satisfied) twice, then out of order, and checks
// that the clock ends with exactly the instants the current record needs
// (none) and that the first processing scheduled what the open record
// needed.
// It runs with the record read by Current and by CurrentItem.
func TestDuplicateAndOutOfOrderChanges(t *testing.T) {
	t.Run("Current", func(t *testing.T) { testDuplicateAndOutOfOrder(t, false) })
	t.Run("CurrentItem", func(t *testing.T) { testDuplicateAndOutOfOrder(t, true) })
}

func testDuplicateAndOutOfOrder(t *testing.T, byItem bool) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "s.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := watcher.New(st, nil, expect.DefaultConfig())
	agent := a2atest.NewAgent(t, "1.0")
	if _, err := svc.PutCard(ctx, "a1", agent.Card()); err != nil {
		t.Fatal(err)
	}
	clock := timers.New(func(context.Context, []expect.Instant) ([]expect.Instant, error) { return nil, nil }, 1, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	p := &feed.Processor{Scheduler: clock, Watcher: svc, Current: svc.Get}
	if byItem {
		p.Current, p.CurrentItem = nil, st.Get
	}

	due := time.Now().Add(time.Hour).UTC()
	e := expect.Expectation{ExpectationID: "e1", Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "1"}, Expects: "paid",
		SatisfiedBy: expect.SatisfiedBy{FactKey: "paid"}, DueAt: expect.FormatTime(due), Grace: "PT1H",
		Horizon: expect.FormatTime(due.Add(-30 * time.Minute)), Basis: "contract"}
	if _, err := svc.Raise(ctx, "a1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{e}}); err != nil {
		t.Fatal(err)
	}
	raised, err := st.ReadFeed(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	// The raise alone: its three instants.
	for _, ch := range raised {
		if err := p.Handle(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if n := clock.Len(); n != 3 {
		t.Fatalf("open record with grace and horizon: %d instants, want 3", n)
	}
	if err := st.AckFeed(ctx, raised[len(raised)-1].Seq); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ReportFacts(ctx, "a1", "reporter", []expect.Fact{{FactKey: "paid", ObservedAt: expect.FormatTime(time.Now())}}); err != nil {
		t.Fatal(err)
	}
	later, err := st.ReadFeed(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(raised), later...)
	// In order, twice, then the whole history reversed.
	var replay []store.Change
	replay = append(replay, all...)
	replay = append(replay, all...)
	for i := len(all) - 1; i >= 0; i-- {
		replay = append(replay, all[i])
	}
	for _, ch := range replay {
		if err := p.Handle(ctx, ch); err != nil {
			t.Fatal(err)
		}
	}
	if pending := clock.Pending(); len(pending) != 0 {
		t.Fatalf("a satisfied expectation left instants behind after replays: %+v", pending)
	}
	_ = feed.Scheduler(clock)
}

// lagRecorder keeps the lags the processor observes.
type lagRecorder struct{ lags []float64 }

func (r *lagRecorder) Record(d *metrics.Desc, v float64, _ ...string) {
	if d == metrics.FeedLag {
		r.lags = append(r.lags, v)
	}
}

// The processor observes each change's lag from its commit time; a change
// without one (written before the time was kept) observes none.
func TestFeedLag(t *testing.T) {
	rec := &lagRecorder{}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	p := &feed.Processor{Metrics: rec, Now: func() time.Time { return now }}
	it := store.Item{Key: store.Key{PK: "x", SK: "y"}, Type: "other"}
	for _, at := range []time.Time{now.Add(-1500 * time.Millisecond), {}} {
		if err := p.Handle(context.Background(), store.Change{Seq: "1", Key: it.Key, New: &it, At: at}); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(rec.lags, []float64{1.5}) {
		t.Fatalf("lags %v, want [1.5]", rec.lags)
	}
}
