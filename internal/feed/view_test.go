package feed

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
)

// TestFeedViewAgreesWithRecord: for records in every state the feed
// meets, the partial decoding gives the same instants, satisfaction,
// observedAt, pending delivery and identity as the whole record.
func TestFeedViewAgreesWithRecord(t *testing.T) {
	due := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	base := func() expect.Record {
		return expect.Record{AgentID: "a1", TaskID: "t", ContextID: "c", RaisedAt: expect.FormatTime(due.Add(-time.Hour)),
			Expectation: expect.Expectation{ExpectationID: "e1", Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "1"},
				Expects: "paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "paid"}, DueAt: expect.FormatTime(due), Basis: "contract"},
			ProjectedDueAt: expect.FormatTime(due), DueAt: expect.FormatTime(due), State: expect.StateOpen}
	}
	var cases []expect.Record
	open := base()
	cases = append(cases, open)
	withGrace := base()
	withGrace.Expectation.Grace, withGrace.Expectation.Horizon = "PT2H", expect.FormatTime(due.Add(-30*time.Minute))
	cases = append(cases, withGrace)
	pastDue := withGrace
	pastDue.PastDue, pastDue.HorizonChecked = true, true
	cases = append(cases, pastDue)
	satisfied := withGrace
	satisfied.State, satisfied.ObservedAt, satisfied.SatisfiedAt = expect.StateSatisfied, expect.FormatTime(due), expect.FormatTime(due)
	satisfied.SatisfiedBy = &expect.Fact{FactKey: "paid", ObservedAt: expect.FormatTime(due)}
	cases = append(cases, satisfied)
	lapsed := withGrace
	lapsed.State, lapsed.Delivery = expect.StateLapsed, &expect.Delivery{MessageID: "m", Attempts: 2}
	cases = append(cases, lapsed)
	delivered := lapsed
	delivered.Delivery = &expect.Delivery{MessageID: "m", DeliveredAt: expect.FormatTime(due)}
	cases = append(cases, delivered)
	for i, r := range cases {
		data, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		it := store.Item{Key: watcher.ExpectationKey(r.AgentID, r.Expectation.ExpectationID), Type: watcher.TypeExpectation, Version: 7, Data: data}
		full, err := watcher.DecodeRecord(it)
		if err != nil {
			t.Fatal(err)
		}
		view, err := decodeView(it)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(expect.Instants(full), expect.Instants(view)) {
			t.Errorf("case %d: instants %v, view %v", i, expect.Instants(full), expect.Instants(view))
		}
		if (full.SatisfiedBy == nil) != (view.SatisfiedBy == nil) || full.ObservedAt != view.ObservedAt ||
			watcher.PendingDelivery(full) != watcher.PendingDelivery(view) || full.AgentID != view.AgentID ||
			full.Expectation.ExpectationID != view.Expectation.ExpectationID || full.Version != view.Version {
			t.Errorf("case %d: view %+v differs from record %+v", i, view, full)
		}
	}
}
