package feed_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
)

// touched fails the test on any call: nothing may act on an expiry.
type touched struct{ t *testing.T }

func (x touched) Schedule(context.Context, []expect.Instant) error {
	x.t.Error("an expired item's deletion scheduled instants")
	return nil
}
func (x touched) Cancel(context.Context, []expect.Instant) error {
	x.t.Error("an expired item's deletion cancelled instants")
	return nil
}
func (x touched) Enqueue(string, string) { x.t.Error("an expired item's deletion queued a lapse task") }
func (x touched) HandleChange(context.Context, store.Change) error {
	x.t.Error("an expired item's deletion reached a handler")
	return nil
}

type expiredCount map[string]float64

func (c expiredCount) Record(d *metrics.Desc, v float64, labels ...string) {
	if d == metrics.RecordsExpired {
		c[labels[0]] += v
	}
}

// TestExpiredChangesAreOnlyCounted: DynamoDB's TTL deletions (Change.Expired)
// of an expectation, even an open one's, and of another record type are
// counted and reach no scheduler, outbox, handler or alert hook: they are
// not withdrawals or cancellations.
func TestExpiredChangesAreOnlyCounted(t *testing.T) {
	x := touched{t}
	count := expiredCount{}
	p := &feed.Processor{Scheduler: x, Outbox: x, Alerts: x, Handlers: map[string]feed.Handler{"execution": x}, Metrics: count,
		Current: func(context.Context, string, string) (*expect.Record, error) {
			t.Error("an expired item's deletion read the record")
			return nil, nil
		}}
	rec := expect.Record{AgentID: "a", State: expect.StateOpen, DueAt: "2030-01-01T00:00:00Z", RaisedAt: "2029-01-01T00:00:00Z",
		Expectation: expect.Expectation{ExpectationID: "e", DueAt: "2030-01-01T00:00:00Z", Grace: "PT1H"}}
	data, _ := json.Marshal(rec)
	for _, old := range []store.Item{
		{Key: watcher.ExpectationKey("a", "e"), Type: watcher.TypeExpectation, Data: data, ExpiresAt: 1},
		{Key: store.Key{PK: "PLAN#a#p", SK: "EXEC"}, Type: "execution", Data: []byte(`{}`), ExpiresAt: 1},
	} {
		if err := p.Handle(context.Background(), store.Change{Seq: "1", Key: old.Key, Old: &old, Expired: true}); err != nil {
			t.Fatal(err)
		}
	}
	if count[watcher.TypeExpectation] != 1 || count["execution"] != 1 {
		t.Fatalf("expired counted %v", count)
	}
}
