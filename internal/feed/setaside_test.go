package feed_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// poisoned fails every change of one expectation, as a change that can
// never be applied (a record its code cannot read, a bug) would.
type poisoned struct {
	p        feed.ChangeHandler
	id       string
	failures atomic.Int64
}

func (h *poisoned) Handle(ctx context.Context, ch store.Change) error {
	if ch.Type() == watcher.TypeExpectation && strings.Contains(ch.Key.String(), h.id) {
		h.failures.Add(1)
		return errors.New("cannot apply this change")
	}
	return h.p.Handle(ctx, ch)
}

type counter struct{ n atomic.Int64 }

func (c *counter) Record(d *metrics.Desc, v float64, _ ...string) {
	if d == metrics.FeedSetAside {
		c.n.Add(int64(v))
	}
}

// TestRunSetsAsideAPoisonedChange: a change that fails every time is tried
// MaxAttempts times and set aside (kept with its reason in the store,
// counted), and the changes behind it are applied: the instants of an
// expectation raised after the poisoned one reach the timers.
func TestRunSetsAsideAPoisonedChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
	due := expect.FormatTime(time.Now().Add(time.Hour))
	for _, id := range []string{"poison", "after"} {
		e := expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: id}, Expects: "paid",
			SatisfiedBy: expect.SatisfiedBy{FactKey: "paid." + id}, DueAt: due, Basis: "contract"}
		if _, err := svc.Raise(ctx, "a1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{e}}); err != nil {
			t.Fatal(err)
		}
	}
	h := &poisoned{p: &feed.Processor{Scheduler: clock, Watcher: svc, Current: svc.Get}, id: "poison"}
	rec := &counter{}
	go feed.RunWith(ctx, st, h, slog.New(slog.NewJSONHandler(io.Discard, nil)), feed.Options{MaxAttempts: 3, SetAside: feed.SetAsideInStore(st, rec, time.Now, 90*24*time.Hour)})

	deadline := time.Now().Add(20 * time.Second)
	for clock.Len() == 0 || rec.n.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s: %d instants held, %d set aside", clock.Len(), rec.n.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, in := range clock.Pending() {
		if in.ExpectationID != "after" {
			t.Fatalf("held %+v", in)
		}
	}
	if h.failures.Load() != 3 {
		t.Fatalf("the poisoned change was tried %d times, want 3", h.failures.Load())
	}
	page, err := st.Query(ctx, store.Query{PK: feed.SetAsidePK, Limit: 10})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("set aside: %+v %v", page.Items, err)
	}
	// Kept for the retention it was given, then gone with what it concerns.
	if exp := page.Items[0].ExpiresAt; exp < time.Now().Add(89*24*time.Hour).Unix() || exp > time.Now().Add(91*24*time.Hour).Unix() {
		t.Fatalf("the set-aside change expires at %d, want in 90 days", exp)
	}
	var kept feed.SetAsideRecord
	if err := json.Unmarshal(page.Items[0].Data, &kept); err != nil || !strings.Contains(kept.Key.String(), "poison") || kept.Reason != "cannot apply this change" {
		t.Fatalf("kept %+v (%v)", kept, err)
	}
	// Tried again (the embedded runtime does every 30 s): while it still
	// fails it stays; once it applies, its effect (the instant it
	// schedules) happens and its record is gone.
	if n, err := feed.RetrySetAside(ctx, st, h.Handle, 100); n != 0 || err == nil {
		t.Fatalf("a change still failing: %d redone, %v", n, err)
	}
	cured := &feed.Processor{Scheduler: clock, Watcher: svc, Current: svc.Get}
	if n, err := feed.RetrySetAside(ctx, st, cured.Handle, 100); n != 1 || err != nil {
		t.Fatalf("a change that applies now: %d redone, %v", n, err)
	}
	held := false
	for _, in := range clock.Pending() {
		held = held || in.ExpectationID == "poison"
	}
	if page, err := st.Query(ctx, store.Query{PK: feed.SetAsidePK, Limit: 10}); err != nil || len(page.Items) != 0 || !held {
		t.Fatalf("after the retry: %d set aside, %v; poison's instant held %v", len(page.Items), err, held)
	}
}

// failingClock is a clock whose every call fails, as Scheduler does when
// it is throttled for minutes.
type failingClock struct{ calls atomic.Int64 }

func (c *failingClock) Schedule(context.Context, []expect.Instant) error {
	c.calls.Add(1)
	return errors.New("ThrottlingException: Rate exceeded")
}

func (c *failingClock) Cancel(context.Context, []expect.Instant) error {
	c.calls.Add(1)
	return errors.New("ThrottlingException: Rate exceeded")
}

// TestReanchoringDoesNotWaitOnTheClock: when an anchor is satisfied, its
// dependents are re-anchored by the change's processing even if every
// call to the clock fails (and the change is retried, then discarded, on
// AWS): a met anchor's dependent never lapses on its old due time.
func TestReanchoringDoesNotWaitOnTheClock(t *testing.T) {
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
	due := time.Now().Add(time.Hour).UTC()
	exp := func(id string, anchor *expect.Anchor) expect.Expectation {
		return expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: id}, Expects: "paid",
			SatisfiedBy: expect.SatisfiedBy{FactKey: "paid." + id}, DueAt: expect.FormatTime(due), Anchor: anchor, Basis: "contract"}
	}
	if _, err := svc.Raise(ctx, "a1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
		exp("anchor", nil), exp("dependent", &expect.Anchor{ExpectationID: "anchor", Offset: "PT10M"})}}); err != nil {
		t.Fatal(err)
	}
	drain := func() {
		changes, err := st.ReadFeed(ctx, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) > 0 {
			if err := st.AckFeed(ctx, changes[len(changes)-1].Seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	drain() // the raise
	observed := time.Now().UTC().Truncate(time.Second)
	if _, err := svc.ReportFacts(ctx, "a1", "reporter", []expect.Fact{{FactKey: "paid.anchor", ObservedAt: expect.FormatTime(observed)}}); err != nil {
		t.Fatal(err)
	}
	changes, err := st.ReadFeed(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	clock := &failingClock{}
	p := &feed.Processor{Scheduler: clock, Watcher: svc, Current: svc.Get}
	failed := 0
	for _, ch := range changes {
		if err := p.Handle(ctx, ch); err != nil {
			failed++
		}
	}
	if failed == 0 || clock.calls.Load() == 0 {
		t.Fatal("the clock was not called, or its failure was not reported (the change must be retried)")
	}
	dep, err := svc.Get(ctx, "a1", "dependent")
	if err != nil {
		t.Fatal(err)
	}
	if want := expect.FormatTime(observed.Add(10 * time.Minute)); dep.DueAt != want {
		t.Fatalf("the dependent's due time is %s with the clock failing; want %s (re-anchored on the fact)", dep.DueAt, want)
	}
}
