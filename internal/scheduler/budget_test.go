package scheduler_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/feed"
	"github.com/agentclock/clockwork/internal/scheduler"
	"github.com/agentclock/clockwork/internal/store/bolt"
	"github.com/agentclock/clockwork/internal/watcher"
)

// TestBudgetWithTheRealDomain checks the schedule budget on the instants
// the domain computes (expect.Instants): one schedule for zero grace and no
// horizon, three with grace and horizon, none without an open expectation.
func TestBudgetWithTheRealDomain(t *testing.T) {
	e := newEnv(t)
	im := &immediates{}
	c := e.clock(fixed(t0), im)
	card := budgetCard(t)
	raise := func(ex expect.Expectation) *expect.Record {
		t.Helper()
		res, err := expect.Raise(card, expect.RaiseRequest{TaskID: "task-1", ContextID: "ctx-1", Expectations: []expect.Expectation{ex}}, nil, nil, t0, expect.DefaultConfig())
		if err != nil {
			t.Fatalf("Raise: %v", err)
		}
		return res.Records[0]
	}
	cases := []struct {
		name  string
		mut   func(*expect.Expectation)
		wantN int
	}{
		{"zero grace, no horizon", func(*expect.Expectation) {}, 1},
		{"explicit zero grace, no horizon", func(x *expect.Expectation) { x.Grace = "PT0S" }, 1},
		{"grace, no horizon", func(x *expect.Expectation) { x.Grace = "PT2H" }, 2},
		{"zero grace and horizon", func(x *expect.Expectation) { x.Horizon = expect.FormatTime(t0.Add(5 * time.Hour)) }, 2},
		{"grace and horizon", func(x *expect.Expectation) {
			x.Grace = "PT2H"
			x.Horizon = expect.FormatTime(t0.Add(5 * time.Hour))
		}, 3},
	}
	for i, tc := range cases {
		ex := budgetExpectation("exp-"+string(rune('a'+i)), t0.Add(time.Hour))
		tc.mut(&ex)
		rec := raise(ex)
		e.counter.Reset()
		if err := c.Schedule(ctxT(t), expect.Instants(rec)); err != nil {
			t.Fatalf("%s: Schedule: %v", tc.name, err)
		}
		if n := e.counter.Count("CreateSchedule"); n != tc.wantN {
			t.Errorf("%s: CreateSchedule = %d, want %d", tc.name, n, tc.wantN)
		}
		// Resolved: the feed cancels every instant of the old record.
		done, _, err := expect.Withdraw(rec, "test", t0)
		if err != nil || len(expect.Instants(done)) != 0 {
			t.Fatalf("%s: withdraw: %v, instants %v", tc.name, err, expect.Instants(done))
		}
		if err := c.Cancel(ctxT(t), expect.Instants(rec)); err != nil {
			t.Fatalf("%s: Cancel: %v", tc.name, err)
		}
		if got := e.names(t); len(got) != 0 {
			t.Fatalf("%s: schedules left behind: %v", tc.name, got)
		}
	}
	if len(im.got()) != 0 {
		t.Errorf("Immediate called for future instants: %v", im.got())
	}
}

// TestScheduleMirrorsOpenExpectations runs the watcher end to end (embedded
// store, change feed, this Clock on moto) and fires schedules as the local
// AWS mode does (Due, the clock handler, Delete). After every step the
// group holds exactly one schedule per instant of each open expectation:
// never more than three per expectation, none for a resolved one.
func TestScheduleMirrorsOpenExpectations(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	setNow := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }

	st, err := bolt.Open(filepath.Join(t.TempDir(), "clockwork.db"), bolt.Options{NoSync: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	svc := watcher.New(st, clock, expect.DefaultConfig())
	c := e.clock(clock, nil, func(cfg *scheduler.Config) { cfg.Immediate = svc.Tick })
	proc := &feed.Processor{Scheduler: c, Watcher: svc, Current: svc.Get}
	drain := func() {
		t.Helper()
		if err := feed.Drain(ctx, st, proc); err != nil {
			t.Fatalf("feed: %v", err)
		}
	}
	const agent = "agent-1"
	if _, err := svc.PutCard(ctx, agent, budgetCardJSON()); err != nil {
		t.Fatalf("PutCard: %v", err)
	}
	ids := []string{}
	raise := func(ex expect.Expectation) {
		t.Helper()
		if _, err := svc.Raise(ctx, agent, expect.RaiseRequest{TaskID: "task-1", ContextID: "ctx-1", Expectations: []expect.Expectation{ex}}); err != nil {
			t.Fatalf("Raise %s: %v", ex.ExpectationID, err)
		}
		ids = append(ids, ex.ExpectationID)
		drain()
	}
	record := func(id string) *expect.Record {
		t.Helper()
		r, err := svc.Get(ctx, agent, id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		return r
	}
	mirror := func(step string) {
		t.Helper()
		var want []string
		for _, id := range ids {
			ins := expect.Instants(record(id))
			if len(ins) > 3 {
				t.Errorf("%s: %s has %d instants", step, id, len(ins))
			}
			want = append(want, namesOf(ins...)...)
		}
		sort.Strings(want)
		if got := e.names(t); !slices.Equal(got, want) {
			t.Fatalf("%s: schedules = %v, want %v", step, got, want)
		}
	}
	creates := func(step string, want int) {
		t.Helper()
		if n := e.counter.Count("CreateSchedule"); n != want {
			t.Errorf("%s: CreateSchedule = %d, want %d", step, n, want)
		}
		e.counter.Reset()
	}

	// (a) zero grace, no horizon: exactly one schedule.
	raise(budgetExpectation("solo", t0.Add(time.Hour)))
	creates("solo", 1)
	mirror("solo raised")

	// (b) grace and horizon: three.
	full := budgetExpectation("full", t0.Add(time.Hour))
	full.Subject.ID, full.SatisfiedBy.FactKey = "43", "invoice.43.paid"
	full.Grace, full.Horizon = "PT2H", expect.FormatTime(t0.Add(5*time.Hour))
	raise(full)
	creates("full", 3)
	mirror("full raised")

	// An anchored dependent: due and grace end.
	dep := budgetExpectation("dep", t0.Add(2*time.Hour))
	dep.Subject.ID, dep.SatisfiedBy.FactKey = "44", "invoice.44.paid"
	dep.Grace, dep.Anchor = "PT30M", &expect.Anchor{ExpectationID: "full", Offset: "PT1H"}
	raise(dep)
	creates("dep", 2)
	mirror("dep raised")

	// Satisfying "full" deletes its three schedules and re-anchors "dep":
	// its two schedules move.
	setNow(t0.Add(15 * time.Minute))
	if _, err := svc.ReportFacts(ctx, agent, "reporter", []expect.Fact{{FactKey: "invoice.43.paid", ObservedAt: expect.FormatTime(t0.Add(10 * time.Minute))}}); err != nil {
		t.Fatalf("ReportFacts: %v", err)
	}
	drain()
	creates("re-anchored", 2)
	mirror("full satisfied, dep re-anchored")
	if got := record("dep").DueAt; got != expect.FormatTime(t0.Add(70*time.Minute)) {
		t.Fatalf("dep dueAt = %s", got)
	}

	// Withdrawing "solo" deletes its schedule.
	if _, err := svc.Withdraw(ctx, agent, []string{"solo"}, "no longer needed"); err != nil {
		t.Fatal(err)
	}
	drain()
	creates("withdrawn", 0)
	mirror("solo withdrawn")

	// Fire what is due as the local AWS mode does. A schedule that fires
	// early or twice changes nothing: the handler decides on the watcher's
	// clock.
	fire := func(step string) []expect.Instant {
		t.Helper()
		due, err := scheduler.Due(ctx, c, clock())
		if err != nil {
			t.Fatalf("%s: Due: %v", step, err)
		}
		for _, in := range due {
			for range 2 { // delivered twice
				if err := svc.Tick(ctx, in); err != nil {
					t.Fatalf("%s: Tick: %v", step, err)
				}
			}
			if err := c.Delete(ctx, in); err != nil {
				t.Fatalf("%s: Delete: %v", step, err)
			}
		}
		drain()
		return due
	}
	setNow(t0.Add(70 * time.Minute))
	graceEnd := expect.Instant{AgentID: agent, ExpectationID: "dep", Kind: expect.InstantGrace, At: t0.Add(100 * time.Minute)}
	if err := svc.Tick(ctx, graceEnd); err != nil { // fires half an hour early
		t.Fatal(err)
	}
	if due := fire("dep due"); len(due) != 1 || due[0].Kind != expect.InstantDue {
		t.Fatalf("due at +70m: %v", due)
	}
	if r := record("dep"); r.State != expect.StateOpen || !r.PastDue {
		t.Fatalf("dep after its due instant: state %s, pastDue %v", r.State, r.PastDue)
	}
	creates("dep past due", 0)
	mirror("dep past due")

	setNow(t0.Add(100 * time.Minute))
	if due := fire("dep grace end"); len(due) != 1 || due[0].Kind != expect.InstantGrace {
		t.Fatalf("due at +100m: %v", due)
	}
	if r := record("dep"); r.State != expect.StateLapsed || r.Lapse == nil || r.Lapse.Lapse != expect.Overdue {
		t.Fatalf("dep after its grace end: %+v", r)
	}
	mirror("dep lapsed")

	// An instant already past when it is scheduled is handled at once,
	// without a schedule.
	late := budgetExpectation("late", t0)
	late.Subject.ID, late.SatisfiedBy.FactKey = "45", "invoice.45.paid"
	raise(late)
	creates("late", 0)
	if r := record("late"); r.State != expect.StateLapsed {
		t.Fatalf("late: state %s, want lapsed at once", r.State)
	}
	mirror("late lapsed")
	if got := e.names(t); len(got) != 0 {
		t.Fatalf("schedules left for resolved expectations: %v", got)
	}
}

func budgetExpectation(id string, due time.Time) expect.Expectation {
	return expect.Expectation{ExpectationID: id, Kind: "payment", Subject: expect.Subject{Type: "invoice", ID: "42"},
		Expects: "invoice is paid", SatisfiedBy: expect.SatisfiedBy{FactKey: "invoice.42.paid"},
		DueAt: expect.FormatTime(due), Basis: "contract"}
}

func budgetCardJSON() []byte {
	b, _ := json.Marshal(map[string]any{
		"name": "Billing agent", "description": "Chases invoices", "version": "1.0.0",
		"defaultInputModes": []any{"text/plain"}, "defaultOutputModes": []any{"text/plain"},
		"supportedInterfaces": []any{map[string]any{"url": "https://agent.example.com/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities": map[string]any{"extensions": []any{map[string]any{
			"uri": expect.URI,
			"params": map[string]any{"keepsTime": false, "lapseSkill": "handle-lapse", "kinds": []any{
				map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "The customer pays the invoice", "basis": "contract"},
			}},
		}}},
		"skills": []any{map[string]any{"id": "handle-lapse", "name": "Handle lapse", "description": "Acts on a lapsed expectation", "tags": []any{"lapse"}}},
	})
	return b
}

func budgetCard(t *testing.T) expect.Card {
	t.Helper()
	card, err := expect.ParseCard("agent-1", budgetCardJSON())
	if err != nil {
		t.Fatalf("ParseCard: %v", err)
	}
	return card
}
