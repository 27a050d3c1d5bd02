package expect

import (
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

func factAt(key, observed, source string, subj *Subject) Fact {
	return Fact{FactKey: key, ObservedAt: observed, Source: source, Subject: subj}
}

func TestRefuteLapsesAnOpenExpectation(t *testing.T) {
	r := raiseOne(t, exp("e1", func(e *Expectation) {
		e.DueAt = FormatTime(at(time.Hour))
		e.RefutedBy = &RefutedBy{FactKey: "invoice.42.declined"}
	}), nil, t0)
	declined := factAt("invoice.42.declined", FormatTime(at(time.Minute)), "psp", nil)
	cases := []struct {
		name string
		f    Fact
		rec  *Record
		want bool
	}{
		{"its key", declined, r, true},
		{"its key on its subject", factAt("invoice.42.declined", declined.ObservedAt, "psp", &Subject{Type: "invoice", ID: "42"}), r, true},
		{"another subject", factAt("invoice.42.declined", declined.ObservedAt, "psp", &Subject{Type: "invoice", ID: "43"}), r, false},
		{"the satisfying key", factAt("invoice.42.paid", declined.ObservedAt, "psp", nil), r, false},
		{"no refutedBy", declined, raiseOne(t, exp("e2"), nil, t0), false},
	}
	for _, c := range cases {
		if got := Refutes(c.f, c.rec); got != c.want {
			t.Errorf("%s: Refutes = %v, want %v", c.name, got, c.want)
		}
	}
	out, changed := Refute(r, declined, nil, at(2*time.Minute))
	if !changed || out.State != StateLapsed || out.Lapse.Lapse != Refuted || out.Lapse.RefutedBy == nil || out.Lapse.RefutedBy.Source != "psp" {
		t.Fatalf("refuted record = %+v (lapse %+v)", out, out.Lapse)
	}
	if out.Lapse.LapsedAt != FormatTime(at(2*time.Minute)) || out.Delivery == nil || out.Delivery.MessageID != MessageID("e1", Refuted, r.DueAt) {
		t.Fatalf("lapse = %+v, delivery %+v", out.Lapse, out.Delivery)
	}
	if r.State != StateOpen {
		t.Fatal("Refute changed its input")
	}
	if Refutes(declined, out) {
		t.Fatal("a lapsed record is refuted again")
	}
	// A satisfying fact still arrives late on a refuted record (recovered).
	if !Matches(factAt("invoice.42.paid", FormatTime(at(3*time.Minute)), "psp", nil), out) {
		t.Fatal("a refuted record no longer takes a late satisfying fact")
	}
}

func TestRaiseValidatesRefutedByAndLookback(t *testing.T) {
	cfg := DefaultConfig()
	off := DefaultConfig()
	off.FactLookbackMax = 0
	cases := []struct {
		name  string
		mut   func(*Expectation)
		cfg   Config
		field string
	}{
		{"refute key required", func(e *Expectation) { e.RefutedBy = &RefutedBy{} }, cfg, "expectations[0].refutedBy.factKey"},
		{"refute key is the satisfying key", func(e *Expectation) { e.RefutedBy = &RefutedBy{FactKey: e.SatisfiedBy.FactKey} }, cfg, "expectations[0].refutedBy.factKey"},
		{"lookback not a duration", func(e *Expectation) { e.SatisfiedBy.Lookback = "1h" }, cfg, "expectations[0].satisfiedBy.lookback"},
		{"lookback above the bound", func(e *Expectation) { e.SatisfiedBy.Lookback = "P2D" }, cfg, "expectations[0].satisfiedBy.lookback"},
		{"lookback zero", func(e *Expectation) { e.SatisfiedBy.Lookback = "PT0S" }, cfg, "expectations[0].satisfiedBy.lookback"},
		{"refute lookback above the bound", func(e *Expectation) { e.RefutedBy = &RefutedBy{FactKey: "x", Lookback: "PT25H"} }, cfg, "expectations[0].refutedBy.lookback"},
		{"lookback turned off", func(e *Expectation) { e.SatisfiedBy.Lookback = "PT1M" }, off, "expectations[0].satisfiedBy.lookback"},
	}
	for _, c := range cases {
		_, err := Raise(testCard(), RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []Expectation{exp("e1", c.mut)}}, nil, nil, t0, c.cfg)
		if err == nil {
			t.Errorf("%s: raised", c.name)
			continue
		}
		if e, ok := err.(*errs.Error); !ok || len(e.Fields) == 0 || e.Fields[0].Path != c.field {
			t.Errorf("%s: error %v, want a field error on %s", c.name, err, c.field)
		}
	}
}

func TestRaiseWithLookback(t *testing.T) {
	subj := Subject{Type: "invoice", ID: "42"}
	mem := func(entries ...*FactMemory) map[string][]*FactMemory {
		out := map[string][]*FactMemory{}
		for _, m := range entries {
			out[m.FactKey] = append(out[m.FactKey], m)
		}
		return out
	}
	paid := func(accepted time.Duration, s *Subject) *FactMemory {
		return Remember("agent-1", factAt("invoice.42.paid", FormatTime(at(accepted-time.Second)), "psp", s), at(accepted))
	}
	declined := func(accepted time.Duration) *FactMemory {
		return Remember("agent-1", factAt("invoice.42.declined", FormatTime(at(accepted)), "psp", nil), at(accepted))
	}
	withLookback := func(e *Expectation) {
		e.DueAt = FormatTime(at(time.Hour))
		e.SatisfiedBy.Lookback = "PT5M"
		e.RefutedBy = &RefutedBy{FactKey: "invoice.42.declined", Lookback: "PT5M"}
	}
	now := at(10 * time.Minute)
	cases := []struct {
		name  string
		mut   func(*Expectation)
		mem   map[string][]*FactMemory
		state State
		lapse LapseKind
	}{
		{"a fact 1 s before the raise", withLookback, mem(paid(10*time.Minute-time.Second, nil)), StateSatisfied, ""},
		{"on its subject", withLookback, mem(paid(9*time.Minute, &subj)), StateSatisfied, ""},
		{"on another subject", withLookback, mem(paid(9*time.Minute, &Subject{Type: "invoice", ID: "43"})), StateOpen, ""},
		{"before the window", withLookback, mem(paid(4*time.Minute, nil)), StateOpen, ""},
		{"at the window's start", withLookback, mem(paid(5*time.Minute, nil)), StateSatisfied, ""},
		{"without lookback", nil, mem(paid(10*time.Minute-time.Second, nil)), StateOpen, ""},
		{"a refuting fact", withLookback, mem(declined(9 * time.Minute)), StateLapsed, Refuted},
		{"refuted after paid", withLookback, mem(paid(8*time.Minute, nil), declined(9*time.Minute)), StateLapsed, Refuted},
		{"paid after refuted", withLookback, mem(paid(9*time.Minute, nil), declined(8*time.Minute)), StateSatisfied, ""},
		{"nothing remembered", withLookback, nil, StateOpen, ""},
	}
	for _, c := range cases {
		mut := func(e *Expectation) { e.DueAt = FormatTime(at(time.Hour)) }
		if c.mut != nil {
			mut = c.mut
		}
		res, err := Raise(testCard(), RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []Expectation{exp("e1", mut)}}, nil, c.mem, now, DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := res.Records[0]
		if r.State != c.state || c.lapse != "" && (r.Lapse == nil || r.Lapse.Lapse != c.lapse) {
			t.Errorf("%s: state %s lapse %+v, want %s %s", c.name, r.State, r.Lapse, c.state, c.lapse)
			continue
		}
		if r.State == StateSatisfied {
			if r.SatisfiedAt != FormatTime(now) || r.SatisfiedBy.Source != "psp" || r.ObservedAt != r.SatisfiedBy.ObservedAt || r.Late {
				t.Errorf("%s: satisfied record %+v, fact %+v", c.name, r, r.SatisfiedBy)
			}
		}
		if len(res.Writes) != 1 || res.Writes[0] != r {
			t.Errorf("%s: writes %v", c.name, res.Writes)
		}
	}
}

func TestLookbackSatisfactionSkipsPredecessors(t *testing.T) {
	pred := raiseOne(t, exp("step-1", func(e *Expectation) { e.DueAt = FormatTime(at(time.Hour)); e.SatisfiedBy.FactKey = "step-1.done" }), nil, t0)
	mem := map[string][]*FactMemory{"invoice.42.paid": {Remember("agent-1", factAt("invoice.42.paid", FormatTime(at(time.Minute)), "psp", nil), at(time.Minute))}}
	e := exp("step-2", func(e *Expectation) {
		e.DueAt = FormatTime(at(time.Hour))
		e.SatisfiedBy.Lookback = "PT1H"
		e.After = []string{"step-1"}
	})
	res, err := Raise(testCard(), RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []Expectation{e}}, map[string]*Record{"step-1": pred}, mem, at(2*time.Minute), DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Writes) != 2 || res.Writes[1].Expectation.ExpectationID != "step-1" || res.Writes[1].State != StateLapsed || res.Writes[1].Lapse.Lapse != Skipped || res.Created[1] {
		t.Fatalf("writes = %+v created %v", res.Writes, res.Created)
	}
	if pred.State != StateOpen {
		t.Fatal("Raise changed an existing record")
	}
}

func TestRecallTakesTheNewestOnTheSubject(t *testing.T) {
	on := func(id string) *Subject { return &Subject{Type: "invoice", ID: id} }
	mems := []*FactMemory{
		Remember("a", factAt("k", FormatTime(t0), "x", nil), at(time.Second)),
		Remember("a", factAt("k", FormatTime(t0), "y", on("42")), at(2*time.Second)),
		Remember("a", factAt("k", FormatTime(t0), "z", on("43")), at(3*time.Second)),
		nil,
	}
	if f, when, ok := Recall(mems, Subject{Type: "invoice", ID: "42"}, t0); !ok || f.Source != "y" || !when.Equal(at(2*time.Second)) {
		t.Fatalf("on 42: %+v %v %v", f, when, ok)
	}
	if f, _, ok := Recall(mems, Subject{Type: "invoice", ID: "44"}, t0); !ok || f.Source != "x" {
		t.Fatalf("on 44 (only the fact naming none): %+v %v", f, ok)
	}
	if _, _, ok := Recall(mems, Subject{Type: "invoice", ID: "44"}, at(1500*time.Millisecond)); ok {
		t.Fatal("recalled a fact accepted before the window")
	}
	if m := Remember("a", factAt("k", "2026-12-01T10:00:00+01:00", "x", on("1")), t0); m.Fact.ObservedAt != "2026-12-01T09:00:00Z" || m.Subject.ID != "1" {
		t.Fatalf("remembered %+v", m)
	}
}
