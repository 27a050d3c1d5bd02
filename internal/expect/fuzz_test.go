package expect

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

// The fuzz targets of the watcher's parsers and validators. Seed corpora
// are under testdata/fuzz/<FuzzName>/; .ci/fuzz.sh runs each for a few
// seconds.

var fuzzNow = time.Date(2026, 6, 24, 10, 0, 0, 0, time.UTC)

// FuzzParseDuration: ParseDuration never panics, and a duration it accepts
// is within its bounds, never negative, and can be added to any instant the
// watcher keeps.
func FuzzParseDuration(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			if !d.IsZero() && d.Clock < 0 {
				t.Fatalf("%q: error %v with a negative partial result", s, err)
			}
			return
		}
		if d.Clock < 0 || d.Clock > maxClock || d.Years < 0 || d.Months < 0 || d.Weeks < 0 || d.Days < 0 {
			t.Fatalf("%q: out of bounds: %+v", s, d)
		}
		for _, at := range []time.Time{time.Unix(0, 0).UTC(), fuzzNow, fuzzNow.Add(DefaultConfig().MaxFuture)} {
			if got := d.AddTo(at); got.Before(at) {
				t.Fatalf("%q added to %s goes back to %s", s, at, got)
			}
		}
		again, err := ParseDuration(s)
		if err != nil || again != d {
			t.Fatalf("%q: not deterministic: %+v %v", s, again, err)
		}
	})
}

// FuzzParseTime: ParseTime never panics; what it accepts is UTC and
// survives FormatTime and ParseTime again unchanged; the validators that use
// it (a fact's observedAt, an expectation's dueAt and horizon) never panic
// and refuse exactly what ParseTime refuses.
func FuzzParseTime(f *testing.F) {
	cfg := DefaultConfig()
	f.Fuzz(func(t *testing.T, s string) {
		tm, err := ParseTime(s)
		var c errs.Collector
		ValidateFact(&c, "f", Fact{FactKey: "k", ObservedAt: s}, fuzzNow, cfg)
		_, ok := checkInstant(&c, "dueAt", s, fuzzNow, cfg)
		if err != nil {
			if ok || len(c.List) < 2 {
				t.Fatalf("%q: ParseTime refuses (%v) but the validators accept: %v", s, err, c.List)
			}
			return
		}
		if tm.Location() != time.UTC {
			t.Fatalf("%q: not UTC: %v", s, tm.Location())
		}
		back, err := ParseTime(FormatTime(tm))
		if err != nil || !back.Equal(tm) {
			t.Fatalf("%q: FormatTime %q reparses to %v, %v", s, FormatTime(tm), back, err)
		}
		if ok && (tm.Year() < 1970 || tm.After(fuzzNow.Add(cfg.MaxFuture))) {
			t.Fatalf("%q: checkInstant accepts an instant out of bounds: %v", s, tm)
		}
	})
}

// FuzzParseCard: ParseCard never panics; a refusal is an Invalid error that
// names at least one field; an accepted card has a usable JSON-RPC
// endpoint, a lapse skill on the card, unique kinds and Raw equal to the
// input.
func FuzzParseCard(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		card, err := ParseCard("agent-1", raw)
		if err != nil {
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != errs.Invalid || len(e.Fields) == 0 {
				t.Fatalf("error %#v is not an Invalid error naming fields", err)
			}
			return
		}
		if !bytes.Equal(card.Raw, raw) {
			t.Fatalf("Raw differs from the input")
		}
		if card.ProtocolVersion != ProtocolV1 && card.ProtocolVersion != ProtocolV03 {
			t.Fatalf("protocol version %q", card.ProtocolVersion)
		}
		if why := cardCheckURL(card.URL); why != "" {
			t.Fatalf("URL %q: %s", card.URL, why)
		}
		found := false
		for _, s := range card.Skills {
			found = found || s == card.Declaration.LapseSkill
		}
		if !found {
			t.Fatalf("lapse skill %q not among %v", card.Declaration.LapseSkill, card.Skills)
		}
		seen := map[string]bool{}
		for _, k := range card.Declaration.Kinds {
			if seen[k.Kind] || k.Kind == "" || k.SubjectType == "" || cardIsPlaceholder(k.Describes) {
				t.Fatalf("kind %+v accepted", k)
			}
			seen[k.Kind] = true
		}
	})
}

// fuzzCard is the card FuzzRaise raises against: kinds payment (any skill)
// and shipment (skill fulfil only).
func fuzzCard(tb testing.TB) Card {
	b, err := json.Marshal(cardV1Fixture())
	if err != nil {
		tb.Fatal(err)
	}
	c, err := ParseCard("agent-1", b)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// FuzzRaise decodes a raise request as the HTTP layer does and raises it
// against a card and existing records: Raise never panics, fails only with
// Invalid or Conflict, and on success returns one record per expectation,
// open (or withdrawn when superseded in the same request), with instants
// that parse.
func FuzzRaise(f *testing.F) {
	card := fuzzCard(f)
	cfg := DefaultConfig()
	existing := func() map[string]*Record {
		open := &Record{AgentID: "agent-1", TaskID: "t", ContextID: "c", State: StateOpen, RaisedAt: FormatTime(fuzzNow.Add(-time.Hour)),
			Expectation: Expectation{ExpectationID: "old", Kind: "payment", Subject: Subject{Type: "invoice", ID: "42"}, Expects: "paid",
				SatisfiedBy: SatisfiedBy{FactKey: "invoice.42.paid"}, DueAt: "2026-07-01T00:00:00Z", Basis: "contract"},
			ProjectedDueAt: "2026-07-01T00:00:00Z", DueAt: "2026-07-01T00:00:00Z"}
		done := open.Clone()
		done.Expectation.ExpectationID, done.State = "done", StateSatisfied
		done.SatisfiedBy = &Fact{FactKey: "invoice.42.paid", ObservedAt: "2026-06-01T00:00:00Z", Source: "r"}
		done.ObservedAt = "2026-06-01T00:00:00Z"
		return map[string]*Record{"old": open, "done": done}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req RaiseRequest
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return
		}
		ex := existing()
		for _, id := range req.References() {
			if id == "" {
				t.Fatalf("References returned an empty id")
			}
		}
		res, err := Raise(card, req, ex, nil, fuzzNow, cfg)
		if err != nil {
			if c := errs.CodeOf(err); c != errs.Invalid && c != errs.Conflict {
				t.Fatalf("error code %s: %v", c, err)
			}
			return
		}
		if len(res.Records) != len(req.Expectations) || len(res.Writes) != len(res.Created) {
			t.Fatalf("%d records for %d expectations; %d writes, %d created", len(res.Records), len(req.Expectations), len(res.Writes), len(res.Created))
		}
		for i, r := range res.Records {
			if r.Expectation.ExpectationID != req.Expectations[i].ExpectationID {
				t.Fatalf("record %d is %q", i, r.Expectation.ExpectationID)
			}
			if _, err := ParseTime(r.DueAt); err != nil {
				t.Fatalf("record %d: dueAt %q: %v", i, r.DueAt, err)
			}
			if _, ok := ex[r.Expectation.ExpectationID]; ok {
				continue // an idempotent retry of an existing record
			}
			if r.State != StateOpen && r.State != StateWithdrawn {
				t.Fatalf("new record %d in state %s", i, r.State)
			}
			if _, err := json.Marshal(r); err != nil {
				t.Fatal(err)
			}
			// The state machine accepts what Raise produced.
			_ = Instants(r)
			_, _ = Tick(r, nil, fuzzNow.Add(365*24*time.Hour))
		}
	})
}
