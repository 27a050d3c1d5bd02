package watcher

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// markedService is a watcher on a fresh store writing effect markers (as
// on AWS), with agent-1's card, and its clock.
func markedService(t *testing.T) (*Service, *settableClock) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "w.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &settableClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	svc := New(st, clock.now, expect.DefaultConfig())
	svc.MarkEffects(true)
	if _, err := svc.PutCard(context.Background(), "agent-1", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	return svc, clock
}

func raiseAll(t *testing.T, svc *Service, exps []expect.Expectation) {
	t.Helper()
	for k := 0; k < len(exps); k += 30 {
		if _, err := svc.Raise(context.Background(), "agent-1", expect.RaiseRequest{TaskID: fmt.Sprintf("t-%d", k), ContextID: "c-1", Expectations: exps[k:min(k+30, len(exps))]}); err != nil {
			t.Fatal(err)
		}
	}
}

func count(t *testing.T, svc *Service, prefix string, n int, state expect.State) int {
	t.Helper()
	c := 0
	for i := range n {
		r, err := svc.Get(context.Background(), "agent-1", fmt.Sprintf("%s%d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		if r.State == state {
			c++
		}
	}
	return c
}

// TestMarkersFitTheCommit: effect markers never push a commit past the
// store's write limit (found by a review: one fact satisfying 60 lapsed
// expectations, and an anchor re-anchoring 60 dependents into the past,
// failed every time with markers): the bounded commits leave them room,
// and a commit that cannot be split marks what fits.
func TestMarkersFitTheCommit(t *testing.T) {
	ctx := context.Background()
	const n = 60

	svc, clock := markedService(t)
	var exps []expect.Expectation
	for i := range n {
		exps = append(exps, expect.Expectation{ExpectationID: fmt.Sprintf("x%d", i), Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "7"},
			Expects: "paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "f.shared"}, DueAt: expect.FormatTime(clock.now().Add(time.Minute)), Basis: "contract"})
	}
	raiseAll(t, svc, exps)
	clock.add(2 * time.Hour)
	var ins []expect.Instant
	for i := range n {
		r, _ := svc.Get(ctx, "agent-1", fmt.Sprintf("x%d", i))
		ins = append(ins, expect.Instants(r)...)
	}
	if err := svc.TickMany(ctx, ins); err != nil {
		t.Fatalf("ticking %d lapses with their markers: %v", n, err)
	}
	if c := count(t, svc, "x", n, expect.StateLapsed); c != n {
		t.Fatalf("%d of %d lapsed", c, n)
	}
	if _, err := svc.ReportFacts(ctx, "agent-1", "agent-1", []expect.Fact{{FactKey: "f.shared", ObservedAt: expect.FormatTime(clock.now())}}); err != nil {
		t.Fatalf("one late fact for %d lapsed expectations: %v", n, err)
	}

	svc, clock = markedService(t)
	start := clock.now()
	deps := []expect.Expectation{{ExpectationID: "anchor", Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "7"},
		Expects: "shipped", SatisfiedBy: expect.SatisfiedBy{FactKey: "f.anchor"}, DueAt: expect.FormatTime(clock.now().Add(48 * time.Hour)), Basis: "contract"}}
	for i := range n {
		deps = append(deps, expect.Expectation{ExpectationID: fmt.Sprintf("d%d", i), Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "7"},
			Expects: "paid", SatisfiedBy: expect.SatisfiedBy{FactKey: fmt.Sprintf("f.d%d", i)}, DueAt: expect.FormatTime(clock.now().Add(47 * time.Hour)),
			Anchor: &expect.Anchor{ExpectationID: "anchor", Offset: "PT1M"}, Basis: "contract"})
	}
	raiseAll(t, svc, deps)
	clock.add(3 * time.Hour)
	if _, err := svc.ReportFacts(ctx, "agent-1", "agent-1", []expect.Fact{{FactKey: "f.anchor", ObservedAt: expect.FormatTime(start)}}); err != nil {
		t.Fatal(err)
	}
	if found, err := svc.ReanchorDependents(ctx, "agent-1", "anchor", start); err != nil || !found {
		t.Fatalf("re-anchoring %d dependents into the past: %v, %v", n, found, err)
	}
	if c := count(t, svc, "d", n, expect.StateLapsed); c != n {
		t.Fatalf("%d of %d dependents lapsed", c, n)
	}
}
