package expect

import (
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func testCard() Card {
	return Card{AgentID: "agent-1", Declaration: Declaration{LapseSkill: "handle-lapse", Kinds: []Kind{
		{Kind: "payment", SubjectType: "invoice", Describes: "An invoice is paid", Basis: "contract"},
		{Kind: "shipment", SubjectType: "order", Describes: "An order ships", Basis: "observed", Skills: []string{"fulfil"}},
	}}, Skills: []string{"handle-lapse", "fulfil"}}
}

func exp(id string, mut ...func(*Expectation)) Expectation {
	e := Expectation{ExpectationID: id, Kind: "payment", Subject: Subject{Type: "invoice", ID: "42"},
		Expects: "invoice 42 is paid", SatisfiedBy: SatisfiedBy{FactKey: "invoice.42.paid"},
		DueAt: FormatTime(t0), Basis: "contract"}
	for _, m := range mut {
		m(&e)
	}
	return e
}

func raiseOne(t *testing.T, e Expectation, existing map[string]*Record, now time.Time) *Record {
	t.Helper()
	res, err := Raise(testCard(), RaiseRequest{TaskID: "task-1", ContextID: "ctx-1", Expectations: []Expectation{e}}, existing, nil, now, DefaultConfig())
	if err != nil {
		t.Fatalf("raise: %v", err)
	}
	return res.Records[0]
}

func TestParseDuration(t *testing.T) {
	base := time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"PT2H", base.Add(2 * time.Hour), true},
		{"P1DT12H", base.Add(36 * time.Hour), true},
		{"P2W", base.AddDate(0, 0, 14), true},
		{"PT0.5S", base.Add(500 * time.Millisecond), true},
		{"PT1,5S", base.Add(1500 * time.Millisecond), true},
		{"P1M", base.AddDate(0, 1, 0), true},
		{"P1Y2M3DT4H5M6S", base.AddDate(1, 2, 3).Add(4*time.Hour + 5*time.Minute + 6*time.Second), true},
		{"PT0S", base, true},
		{"", time.Time{}, false},
		{"P", time.Time{}, false},
		{"PT", time.Time{}, false},
		{"2h", time.Time{}, false},
		{"-PT1H", time.Time{}, false},
		{"PT1H2H", time.Time{}, false},
		{"P1H", time.Time{}, false},
		{"PT1D", time.Time{}, false},
		{"P1.5D", time.Time{}, false},
		{"PT99999999999999999999H", time.Time{}, false},
		{"P1DT", time.Time{}, false},
		{"PTT1H", time.Time{}, false},
	}
	for _, c := range cases {
		d, err := ParseDuration(c.in)
		if (err == nil) != c.ok {
			t.Errorf("ParseDuration(%q) err=%v, want ok=%v", c.in, err, c.ok)
			continue
		}
		if c.ok && !d.AddTo(base).Equal(c.want) {
			t.Errorf("ParseDuration(%q) adds to %v, want %v", c.in, d.AddTo(base), c.want)
		}
	}
}

func TestRaiseValidation(t *testing.T) {
	open := raiseOne(t, exp("e-open"), nil, t0)
	other := raiseOne(t, exp("e-other", func(e *Expectation) { e.Subject.ID = "43" }), nil, t0)
	done := open.Clone()
	done.Expectation.ExpectationID = "e-done"
	done.State = StateSatisfied
	deep := open.Clone()
	deep.Expectation.ExpectationID = "e-deep"
	deep.Lineage = 16
	existing := map[string]*Record{"e-open": open, "e-other": other, "e-done": done, "e-deep": deep}
	cases := []struct {
		name string
		req  RaiseRequest
		path string
		code errs.Code
	}{
		{"no task", RaiseRequest{ContextID: "c", Expectations: []Expectation{exp("a")}}, "taskId", errs.Invalid},
		{"no context", RaiseRequest{TaskID: "t", Expectations: []Expectation{exp("a")}}, "contextId", errs.Invalid},
		{"empty", RaiseRequest{TaskID: "t", ContextID: "c"}, "expectations", errs.Invalid},
		{"unknown kind", req(exp("a", func(e *Expectation) { e.Kind = "nope" })), "expectations[0].kind", errs.Invalid},
		{"skill not allowed", req(exp("a", func(e *Expectation) { e.Kind = "shipment" })), "skill", errs.Invalid},
		{"no due", req(exp("a", func(e *Expectation) { e.DueAt = "" })), "expectations[0].dueAt", errs.Invalid},
		{"bad due", req(exp("a", func(e *Expectation) { e.DueAt = "tomorrow" })), "expectations[0].dueAt", errs.Invalid},
		{"due centuries away", req(exp("a", func(e *Expectation) { e.DueAt = "2400-01-01T00:00:00Z" })), "expectations[0].dueAt", errs.Invalid},
		{"bad grace", req(exp("a", func(e *Expectation) { e.Grace = "2 hours" })), "expectations[0].grace", errs.Invalid},
		{"bad horizon", req(exp("a", func(e *Expectation) { e.Horizon = "soon" })), "expectations[0].horizon", errs.Invalid},
		{"unknown anchor", req(exp("a", func(e *Expectation) { e.Anchor = &Anchor{ExpectationID: "zz", Offset: "PT1H"} })), "expectations[0].anchor.expectationId", errs.Invalid},
		{"bad offset", req(exp("a", func(e *Expectation) { e.Anchor = &Anchor{ExpectationID: "e-open", Offset: "1h"} })), "expectations[0].anchor.offset", errs.Invalid},
		{"unknown after", req(exp("a", func(e *Expectation) { e.After = []string{"zz"} })), "expectations[0].after[0]", errs.Invalid},
		{"after other subject", req(exp("a", func(e *Expectation) { e.After = []string{"e-other"} })), "expectations[0].after[0]", errs.Invalid},
		{"supersede unknown", req(exp("a", func(e *Expectation) { e.Supersedes = "zz" })), "expectations[0].supersedes", errs.Invalid},
		{"supersede closed", req(exp("a", func(e *Expectation) { e.Supersedes = "e-done" })), "expectations[0].supersedes", errs.Invalid},
		{"lineage bound", req(exp("a", func(e *Expectation) { e.Supersedes = "e-deep" })), "expectations[0].supersedes", errs.Invalid},
		{"no fact key", req(exp("a", func(e *Expectation) { e.SatisfiedBy.FactKey = "" })), "expectations[0].satisfiedBy.factKey", errs.Invalid},
		{"no subject id", req(exp("a", func(e *Expectation) { e.Subject.ID = "" })), "expectations[0].subject.id", errs.Invalid},
		{"duplicate in batch", req(exp("a"), exp("a")), "expectations[1].expectationId", errs.Invalid},
		{"reuse with other body", req(exp("e-open", func(e *Expectation) { e.Expects = "other" })), "", errs.Conflict},
		{"second bad, first good: none raised", req(exp("ok"), exp("b", func(e *Expectation) { e.Kind = "x" })), "expectations[1].kind", errs.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := Raise(testCard(), c.req, existing, nil, t0, DefaultConfig())
			if errs.CodeOf(err) != c.code {
				t.Fatalf("code = %v (%v), want %v", errs.CodeOf(err), err, c.code)
			}
			if len(res.Writes) != 0 {
				t.Fatalf("a rejected raise must write nothing, got %d writes", len(res.Writes))
			}
			if c.path == "" {
				return
			}
			e := err.(*errs.Error)
			for _, f := range e.Fields {
				if f.Path == c.path {
					return
				}
			}
			t.Fatalf("no error on %s: %v", c.path, e.Fields)
		})
	}
}

func req(es ...Expectation) RaiseRequest {
	return RaiseRequest{TaskID: "task-1", ContextID: "ctx-1", Expectations: es}
}

func TestRaiseIdempotentAndSupersede(t *testing.T) {
	r1 := raiseOne(t, exp("e1"), nil, t0)
	if r1.State != StateOpen || r1.ProjectedDueAt != r1.DueAt || r1.Lineage != 0 {
		t.Fatalf("new record: %+v", r1)
	}
	res, err := Raise(testCard(), req(exp("e1")), map[string]*Record{"e1": r1}, nil, at(time.Hour), DefaultConfig())
	if err != nil || len(res.Writes) != 0 || res.Records[0] != r1 {
		t.Fatalf("identical retry must return the existing record and write nothing: %v %+v", err, res)
	}
	res, err = Raise(testCard(), req(exp("e2", func(e *Expectation) { e.Supersedes = "e1" })), map[string]*Record{"e1": r1}, nil, at(time.Minute), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Writes) != 2 || !res.Created[0] || res.Created[1] {
		t.Fatalf("supersede writes the new record and the withdrawn one: %+v", res)
	}
	if w := res.Writes[1]; w.State != StateWithdrawn || w.WithdrawnReason != "superseded by e2" {
		t.Fatalf("superseded: %+v", w)
	}
	if res.Writes[0].Lineage != 1 {
		t.Fatalf("lineage = %d, want 1", res.Writes[0].Lineage)
	}
	if r1.State != StateOpen {
		t.Fatal("Raise mutated its input")
	}
}

func TestTick(t *testing.T) {
	withGrace := raiseOne(t, exp("g", func(e *Expectation) { e.Grace = "PT2H" }), nil, at(-time.Hour))
	noGrace := raiseOne(t, exp("n"), nil, at(-time.Hour))
	horizon := raiseOne(t, exp("h", func(e *Expectation) { e.Grace = "PT2H"; e.Horizon = FormatTime(at(-30 * time.Minute)) }), nil, at(-time.Hour))
	active := &SubjectRecord{LastFactAt: FormatTime(at(-50 * time.Minute)), LastReportedAt: FormatTime(at(-40 * time.Minute))}
	stale := &SubjectRecord{LastFactAt: FormatTime(at(-5 * time.Hour)), LastReportedAt: FormatTime(at(-5 * time.Hour))}
	cases := []struct {
		name     string
		r        *Record
		subj     *SubjectRecord
		now      time.Time
		state    State
		pastDue  bool
		lapse    LapseKind
		changed  bool
		lastFact string
	}{
		{"before due", withGrace, nil, at(-time.Minute), StateOpen, false, "", false, ""},
		{"in grace", withGrace, nil, at(time.Hour), StateOpen, true, "", true, ""},
		{"grace over", withGrace, nil, at(2 * time.Hour), StateLapsed, true, Overdue, true, ""},
		{"no grace at due", noGrace, nil, t0, StateLapsed, true, Overdue, true, ""},
		{"horizon silent", horizon, nil, at(-10 * time.Minute), StateLapsed, false, Stalled, true, ""},
		{"horizon silent, stale fact before raise", horizon, stale, at(-10 * time.Minute), StateLapsed, false, Stalled, true, ""},
		{"horizon with activity", horizon, active, at(-10 * time.Minute), StateOpen, false, "", true, ""},
		{"horizon with activity then overdue", horizon, active, at(3 * time.Hour), StateLapsed, true, Overdue, true, FormatTime(at(-50 * time.Minute))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, changed := Tick(c.r, c.subj, c.now)
			if out.State != c.state || out.PastDue != c.pastDue || changed != c.changed {
				t.Fatalf("state=%s pastDue=%v changed=%v", out.State, out.PastDue, changed)
			}
			if c.lapse != "" {
				if out.Lapse == nil || out.Lapse.Lapse != c.lapse || out.Lapse.LapsedAt != FormatTime(c.now) || out.Lapse.LastFactAt != c.lastFact {
					t.Fatalf("lapse = %+v", out.Lapse)
				}
				if out.Delivery == nil || out.Delivery.MessageID != MessageID(c.r.Expectation.ExpectationID, c.lapse, c.r.DueAt) {
					t.Fatalf("delivery = %+v", out.Delivery)
				}
				again, changed := Tick(out, c.subj, c.now.Add(time.Hour))
				if changed || again != out {
					t.Fatal("a lapsed record must never lapse again")
				}
			}
		})
	}
}

func TestMessageIDDeterministic(t *testing.T) {
	a := MessageID("e1", Overdue, "2026-12-01T09:00:00Z")
	if a != MessageID("e1", Overdue, "2026-12-01T09:00:00Z") {
		t.Fatal("not deterministic")
	}
	for _, b := range []string{MessageID("e2", Overdue, "2026-12-01T09:00:00Z"), MessageID("e1", Stalled, "2026-12-01T09:00:00Z"), MessageID("e1", Overdue, "2026-12-01T10:00:00Z")} {
		if a == b {
			t.Fatal("distinct lapses share a messageId")
		}
	}
}

func TestSatisfy(t *testing.T) {
	r := raiseOne(t, exp("e1", func(e *Expectation) { e.After = nil }), nil, at(-time.Hour))
	f := Fact{FactKey: "invoice.42.paid", ObservedAt: FormatTime(at(time.Minute)), Source: "agent-1"}
	if !Matches(f, r) {
		t.Fatal("exact key should match")
	}
	for _, bad := range []Fact{
		{FactKey: "invoice.42.Paid", ObservedAt: f.ObservedAt},
		{FactKey: "invoice.42.paid ", ObservedAt: f.ObservedAt},
		{FactKey: "invoice.42.paid", ObservedAt: f.ObservedAt, Subject: &Subject{Type: "invoice", ID: "43"}},
	} {
		if Matches(bad, r) {
			t.Fatalf("%+v must not match", bad)
		}
	}
	out, eff := Satisfy(r, f, at(2*time.Minute))
	if out.State != StateSatisfied || !out.Late || out.SatisfiedAt != FormatTime(at(2*time.Minute)) || out.ObservedAt != f.ObservedAt || out.SatisfiedBy.Source != "agent-1" || out.SatisfiedBy.Subject == nil {
		t.Fatalf("satisfied: %+v", out)
	}
	if !eff.AnchorObservedAt.Equal(at(time.Minute)) {
		t.Fatal("anchor time is the fact's observedAt")
	}
	if Matches(f, out) {
		t.Fatal("a satisfied record matches no further fact")
	}
	// A fact after an overdue lapse is recorded as late and keeps the lapse.
	lapsed, _ := Tick(r, nil, at(time.Hour))
	late, _ := Satisfy(lapsed, f, at(2*time.Hour))
	if late.State != StateLapsed || late.Lapse == nil || !late.Late || late.SatisfiedBy == nil {
		t.Fatalf("late: %+v", late)
	}
	if Matches(f, late) {
		t.Fatal("a late fact is recorded once")
	}
	// On time.
	onTime, _ := Satisfy(r, Fact{FactKey: "invoice.42.paid", ObservedAt: FormatTime(at(-time.Minute))}, at(0))
	if onTime.Late {
		t.Fatal("observedAt before dueAt is not late")
	}
}

func TestSkipAndReanchor(t *testing.T) {
	pred := raiseOne(t, exp("p"), nil, at(-time.Hour))
	dep := raiseOne(t, exp("d", func(e *Expectation) { e.Anchor = &Anchor{ExpectationID: "p", Offset: "PT3H"}; e.Grace = "PT1H" }), map[string]*Record{"p": pred}, at(-time.Hour))
	s, changed := Skip(pred, []string{"later"}, nil, at(time.Minute))
	if !changed || s.State != StateLapsed || s.Lapse.Lapse != Skipped || s.Lapse.SatisfiedAfter[0] != "later" {
		t.Fatalf("skip: %+v", s)
	}
	if _, changed := Skip(s, []string{"x"}, nil, at(time.Hour)); changed {
		t.Fatal("skip of a lapsed record")
	}
	re, changed := Reanchor(dep, at(time.Hour), nil, at(time.Hour))
	if !changed || re.DueAt != FormatTime(at(4*time.Hour)) || re.ProjectedDueAt != dep.ProjectedDueAt || re.State != StateOpen {
		t.Fatalf("reanchor: %+v", re)
	}
	// Re-anchored into the past beyond grace: lapses at once.
	past, _ := Reanchor(dep, at(-10*time.Hour), nil, at(0))
	if past.State != StateLapsed || past.Lapse.Lapse != Overdue || past.Lapse.DueAt != FormatTime(at(-7*time.Hour)) {
		t.Fatalf("reanchor past: %+v", past)
	}
	// Re-anchored into its grace window: past due, still open.
	grace, _ := Reanchor(dep, at(-3*time.Hour-30*time.Minute), nil, at(0))
	if grace.State != StateOpen || !grace.PastDue {
		t.Fatalf("reanchor grace: %+v", grace)
	}
}

func TestWithdraw(t *testing.T) {
	r := raiseOne(t, exp("e1"), nil, at(-time.Hour))
	w, changed, err := Withdraw(r, "no longer needed", t0)
	if err != nil || !changed || w.State != StateWithdrawn || w.WithdrawnReason != "no longer needed" {
		t.Fatalf("%+v %v", w, err)
	}
	if _, changed, err := Withdraw(w, "again", t0); err != nil || changed {
		t.Fatal("withdrawing twice is a no-op")
	}
	if _, changed := Tick(w, nil, at(48*time.Hour)); changed {
		t.Fatal("withdrawn never lapses")
	}
	s, _ := Satisfy(r, Fact{FactKey: "invoice.42.paid", ObservedAt: FormatTime(t0)}, t0)
	if _, _, err := Withdraw(s, "x", t0); !errs.Is(err, errs.Conflict) {
		t.Fatalf("withdrawing satisfied: %v", err)
	}
	if len(Instants(w)) != 0 || len(Instants(s)) != 0 {
		t.Fatal("closed records have no instants")
	}
}

func TestInstants(t *testing.T) {
	r := raiseOne(t, exp("e", func(e *Expectation) { e.Grace = "PT1H"; e.Horizon = FormatTime(at(5 * time.Hour)) }), nil, at(-time.Hour))
	ins := Instants(r)
	if len(ins) != 3 || ins[0].Kind != InstantDue || ins[1].Kind != InstantGrace || ins[2].Kind != InstantHorizon {
		t.Fatalf("%+v", ins)
	}
	one := raiseOne(t, exp("z"), nil, at(-time.Hour))
	if ins := Instants(one); len(ins) != 1 || ins[0].Kind != InstantGrace {
		t.Fatalf("zero grace, no horizon: one instant, got %+v", ins)
	}
	pd, _ := Tick(r, nil, at(time.Minute))
	if ins := Instants(pd); len(ins) != 2 {
		t.Fatalf("past due drops the due instant: %+v", ins)
	}
}

func TestObserveFact(t *testing.T) {
	s := &SubjectRecord{AgentID: "a", Subject: Subject{Type: "invoice", ID: "42"}}
	f := Fact{FactKey: "k", ObservedAt: FormatTime(t0)}
	s1, changed := ObserveFact(s, f, false, at(time.Minute))
	if !changed || s1.LastFactAt != FormatTime(t0) || s1.LastReportedAt != FormatTime(at(time.Minute)) {
		t.Fatalf("%+v", s1)
	}
	if _, changed := ObserveFact(s1, f, false, at(time.Hour)); changed {
		t.Fatal("the same fact twice changes nothing")
	}
	older := Fact{FactKey: "k", ObservedAt: FormatTime(at(-time.Hour))}
	s2, changed := ObserveFact(s1, older, true, at(time.Hour))
	if !changed || s2.LastFactAt != FormatTime(t0) {
		t.Fatal("lastFactAt is the max observedAt")
	}
}

func TestNotYet(t *testing.T) {
	r := raiseOne(t, exp("e", func(e *Expectation) { e.Grace = "PT1H" }), nil, at(-time.Hour))
	due := Instants(r)[0]
	pastDue, _ := Tick(r, nil, at(time.Minute))
	satisfied := r.Clone()
	satisfied.State = StateSatisfied
	moved := due
	moved.At = due.At.Add(time.Second)
	for _, c := range []struct {
		name string
		r    *Record
		in   Instant
		now  time.Time
		want bool
	}{
		{"before its time: arm again", r, due, due.At.Add(-time.Millisecond), true},
		{"at its time", r, due, due.At, false},
		{"after its time", r, due, due.At.Add(time.Second), false},
		{"no longer the record's (past due already)", pastDue, due, due.At.Add(-time.Second), false},
		{"the record is no longer open", satisfied, due, due.At.Add(-time.Second), false},
		{"another time than the record's (re-anchored)", r, moved, due.At, false},
		{"no record", nil, due, due.At.Add(-time.Second), false},
	} {
		if got := NotYet(c.r, c.in, c.now); got != c.want {
			t.Errorf("%s: NotYet = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestStampExpiry(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	lapsed := func(d *Delivery) *Record { return &Record{State: StateLapsed, Delivery: d} }
	tests := []struct {
		name  string
		r     *Record
		keep  time.Duration
		want  string
		final bool
	}{
		{"open never expires", &Record{State: StateOpen}, time.Hour, "", false},
		{"satisfied", &Record{State: StateSatisfied}, time.Hour, "2026-01-02T04:04:06Z", true},
		{"withdrawn", &Record{State: StateWithdrawn}, 3 * time.Second, "2026-01-02T03:04:09Z", true},
		{"lapsed, task pending", lapsed(&Delivery{MessageID: "m"}), time.Hour, "", false},
		{"lapsed, delivered", lapsed(&Delivery{DeliveredAt: "x"}), time.Hour, "2026-01-02T04:04:06Z", true},
		{"lapsed, dead-lettered", lapsed(&Delivery{DeadLettered: true}), time.Hour, "2026-01-02T04:04:06Z", true},
		{"lapsed, suppressed", lapsed(&Delivery{Suppressed: true}), time.Hour, "2026-01-02T04:04:06Z", true},
		{"keep forever", &Record{State: StateSatisfied}, 0, "", true},
		{"kept expiry", &Record{State: StateSatisfied, ExpiresAt: "2030-01-01T00:00:00Z"}, time.Hour, "2030-01-01T00:00:00Z", true},
		{"replayed dead letter", &Record{State: StateLapsed, Delivery: &Delivery{}, ExpiresAt: "2030-01-01T00:00:00Z"}, time.Hour, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if Final(tc.r) != tc.final {
				t.Fatalf("Final = %v, want %v", !tc.final, tc.final)
			}
			StampExpiry(tc.r, now, tc.keep)
			if tc.r.ExpiresAt != tc.want {
				t.Fatalf("ExpiresAt = %q, want %q", tc.r.ExpiresAt, tc.want)
			}
		})
	}
}

func TestAnchoredOn(t *testing.T) {
	at := func(s string) *Record { return &Record{RaisedAt: s} }
	for _, tc := range []struct {
		dep, anchor string
		want        bool
	}{
		{"2026-01-01T00:00:10Z", "2026-01-01T00:00:05Z", true},  // raised before
		{"2026-01-01T00:00:10Z", "2026-01-01T00:00:10Z", true},  // in the same request
		{"2026-01-01T00:00:10Z", "2026-01-01T00:00:11Z", false}, // a later expectation of the id
		{"", "2026-01-01T00:00:11Z", true},                      // unknown: as before
	} {
		if got := AnchoredOn(at(tc.dep), at(tc.anchor)); got != tc.want {
			t.Errorf("AnchoredOn(raised %q, anchor raised %q) = %v", tc.dep, tc.anchor, got)
		}
	}
}
