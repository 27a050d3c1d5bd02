package watcher

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

type settableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settableClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *settableClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestTickReanchorsWhatTheFeedDidNot: an anchor is satisfied, and the
// change feed's re-anchoring of its dependent never happens (on AWS: the
// stream record failed past its retries and was discarded). When the
// dependent's old due time and grace pass, the tick re-anchors it on its
// satisfied anchor instead of lapsing it "overdue". Before, Tick decided
// on the record alone, and the dependent lapsed although its anchor was met.
func TestTickReanchorsWhatTheFeedDidNot(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "w.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := &settableClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	svc := New(st, clock.now, expect.DefaultConfig())
	if _, err := svc.PutCard(ctx, "agent-1", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	due := func(d time.Duration) string { return expect.FormatTime(clock.now().Add(d)) }
	exp := func(id, dueAt string, anchor *expect.Anchor) expect.Expectation {
		return expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "7"},
			Expects: id + " happens", SatisfiedBy: expect.SatisfiedBy{FactKey: "invoice.7." + id}, DueAt: dueAt, Anchor: anchor, Basis: "contract"}
	}
	_, err = svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "t-1", ContextID: "c-1", Expectations: []expect.Expectation{
		exp("ship", due(time.Hour), nil),
		exp("deliver", due(2*time.Minute), &expect.Anchor{ExpectationID: "ship", Offset: "PT2H"}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	shipped := clock.now()
	if _, err := svc.ReportFacts(ctx, "agent-1", "agent-1", []expect.Fact{{FactKey: "invoice.7.ship", ObservedAt: expect.FormatTime(shipped)}}); err != nil {
		t.Fatal(err)
	}
	// No feed: ReanchorDependents never runs. The old due time passes.
	clock.add(10 * time.Minute)
	for _, in := range []expect.Instant{{AgentID: "agent-1", ExpectationID: "deliver", Kind: expect.InstantDue, At: clock.now()}} {
		if err := svc.TickMany(ctx, []expect.Instant{in}); err != nil {
			t.Fatal(err)
		}
		if err := svc.Tick(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	r, err := svc.Get(ctx, "agent-1", "deliver")
	if err != nil {
		t.Fatal(err)
	}
	if r.State != expect.StateOpen || r.DueAt != expect.FormatTime(shipped.Add(2*time.Hour)) {
		t.Fatalf("deliver: state %s, due %s; want open, due two hours after the shipment (%s)", r.State, r.DueAt, shipped.Add(2*time.Hour))
	}
	// Once due from the anchor, it lapses as any record does.
	clock.add(3 * time.Hour)
	if err := svc.Tick(ctx, expect.Instant{AgentID: "agent-1", ExpectationID: "deliver", Kind: expect.InstantDue, At: clock.now()}); err != nil {
		t.Fatal(err)
	}
	if r, _ := svc.Get(ctx, "agent-1", "deliver"); r.State != expect.StateLapsed {
		t.Fatalf("deliver past its re-anchored due time: %s", r.State)
	}
}
