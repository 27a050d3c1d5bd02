package watcher

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

func newTestService(t *testing.T, cfg expect.Config) (*Service, *settableClock, store.Store) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "w.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The store expires items on the wall clock: the watcher's starts there.
	clock := &settableClock{t: time.Now().UTC().Truncate(time.Second)}
	svc := New(st, clock.now, cfg)
	if _, err := svc.PutCard(context.Background(), "agent-1", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	return svc, clock, st
}

func paymentExpectation(id string, due time.Time, mut func(*expect.Expectation)) expect.Expectation {
	e := expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: id},
		Expects: id + " is paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "invoice." + id + ".paid"}, DueAt: expect.FormatTime(due), Basis: "contract"}
	if mut != nil {
		mut(&e)
	}
	return e
}

// TestRefutingFactLapsesThroughTheLookup: a refuting fact finds the open
// expectation through its lookup entry, lapses it "refuted" in the
// fact's commit, and leaves the lookup once lapsed.
func TestRefutingFactLapsesThroughTheLookup(t *testing.T) {
	ctx := context.Background()
	svc, clock, _ := newTestService(t, expect.DefaultConfig())
	refuted := func(e *expect.Expectation) {
		e.RefutedBy = &expect.RefutedBy{FactKey: "invoice." + e.ExpectationID + ".declined"}
	}
	if _, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
		paymentExpectation("i1", clock.now().Add(time.Hour), refuted), paymentExpectation("i2", clock.now().Add(time.Hour), refuted),
	}}); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	outs, err := svc.ReportFacts(ctx, "agent-1", "psp", []expect.Fact{{FactKey: "invoice.i1.declined", ObservedAt: expect.FormatTime(clock.now())}})
	if err != nil {
		t.Fatal(err)
	}
	if len(outs[0].Refuted) != 1 || outs[0].Refuted[0] != "i1" || len(outs[0].Satisfied) != 0 {
		t.Fatalf("outcome %+v", outs)
	}
	r, _ := svc.Get(ctx, "agent-1", "i1")
	if r.State != expect.StateLapsed || r.Lapse.Lapse != expect.Refuted || r.Lapse.RefutedBy.Source != "psp" || !PendingDelivery(r) {
		t.Fatalf("i1 = %+v lapse %+v", r, r.Lapse)
	}
	if r2, _ := svc.Get(ctx, "agent-1", "i2"); r2.State != expect.StateOpen {
		t.Fatalf("i2 = %s", r2.State)
	}
	// Again: nothing more is refuted.
	outs, err = svc.ReportFacts(ctx, "agent-1", "psp", []expect.Fact{{FactKey: "invoice.i1.declined", ObservedAt: expect.FormatTime(clock.now())}})
	if err != nil || len(outs[0].Refuted) != 0 {
		t.Fatalf("second report: %+v %v", outs, err)
	}
	// The satisfying fact arrives late: recorded on the lapsed record.
	outs, err = svc.ReportFacts(ctx, "agent-1", "psp", []expect.Fact{{FactKey: "invoice.i1.paid", ObservedAt: expect.FormatTime(clock.now())}})
	if err != nil || len(outs[0].Satisfied) != 1 {
		t.Fatalf("late fact: %+v %v", outs, err)
	}
}

// TestFactBeforeTheRaise: a fact reported 1 s before a raise satisfies an
// expectation raised with a lookback, and not one raised without; the
// memory is to expire -fact-lookback-max after the fact was accepted.
func TestFactBeforeTheRaise(t *testing.T) {
	ctx := context.Background()
	svc, clock, st := newTestService(t, expect.DefaultConfig())
	observed := expect.FormatTime(clock.now().Add(-time.Second))
	if _, err := svc.ReportFacts(ctx, "agent-1", "webhook", []expect.Fact{{FactKey: "invoice.a.paid", ObservedAt: observed}, {FactKey: "invoice.b.paid", ObservedAt: observed}}); err != nil {
		t.Fatal(err)
	}
	it, err := st.Get(ctx, FactMemoryKey("agent-1", "invoice.a.paid", nil))
	if err != nil {
		t.Fatal(err)
	}
	if want := expect.ExpiryTime(clock.now(), 24*time.Hour).Unix(); it.ExpiresAt != want {
		t.Fatalf("memory expires at %d, want %d", it.ExpiresAt, want)
	}
	clock.add(time.Second)
	recs, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
		paymentExpectation("a", clock.now().Add(time.Hour), func(e *expect.Expectation) { e.SatisfiedBy.Lookback = "PT1M" }),
		paymentExpectation("b", clock.now().Add(time.Hour), nil),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].State != expect.StateSatisfied || recs[0].SatisfiedBy.Source != "webhook" || recs[0].ObservedAt != observed || recs[0].SatisfiedAt != expect.FormatTime(clock.now()) {
		t.Fatalf("a = %+v (fact %+v)", recs[0], recs[0].SatisfiedBy)
	}
	if recs[1].State != expect.StateOpen {
		t.Fatalf("b without lookback = %s", recs[1].State)
	}
	// A retry of the raise answers the same records.
	again, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
		paymentExpectation("a", clock.now().Add(time.Hour), func(e *expect.Expectation) { e.SatisfiedBy.Lookback = "PT1M" }),
	}})
	if err != nil || again[0].State != expect.StateSatisfied {
		t.Fatalf("retry: %+v %v", again, err)
	}
}

// TestFactMemoriesOfALargeReport: a report of as many facts as a request
// may hold, each satisfying an expectation on its own subject, commits
// (the memories that do not fit its commit follow in their own) and every
// fact is remembered.
func TestFactMemoriesOfALargeReport(t *testing.T) {
	ctx := context.Background()
	cfg := expect.DefaultConfig()
	svc, clock, st := newTestService(t, cfg)
	var exps []expect.Expectation
	var facts []expect.Fact
	for i := range cfg.MaxPerRequest {
		id := fmt.Sprintf("n%d", i)
		exps = append(exps, paymentExpectation(id, clock.now().Add(time.Hour), nil))
		facts = append(facts, expect.Fact{FactKey: "invoice." + id + ".paid", ObservedAt: expect.FormatTime(clock.now())})
	}
	if _, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: exps}); err != nil {
		t.Fatal(err)
	}
	outs, err := svc.ReportFacts(ctx, "agent-1", "psp", facts)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range outs {
		if len(o.Satisfied) != 1 {
			t.Fatalf("fact %d: %+v", i, o)
		}
		if _, err := st.Get(ctx, FactMemoryKey("agent-1", facts[i].FactKey, nil)); err != nil {
			t.Fatalf("fact %d not remembered: %v", i, err)
		}
	}
}
