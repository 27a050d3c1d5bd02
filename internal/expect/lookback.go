package expect

import (
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

// RememberedFact is a fact the watcher accepted and when it accepted it
// (the watcher's clock, not the fact's observedAt).
type RememberedFact struct {
	Fact       Fact   `json:"fact"`
	AcceptedAt string `json:"acceptedAt"`
}

// FactMemory is the watcher's memory of the facts it accepted with one
// key, for expectations raised afterwards with a lookback: the latest fact
// per subject named (a fact naming none counts as its own subject), newest
// first, at most MaxRememberedPerKey of them. It is kept for
// Config.FactLookbackMax after its newest fact, and no longer.
type FactMemory struct {
	AgentID string           `json:"agentId"`
	FactKey string           `json:"factKey"`
	Facts   []RememberedFact `json:"facts"`
	Version int64            `json:"-"`
}

// MaxRememberedPerKey bounds the facts remembered under one key: a key
// reported on many subjects keeps its latest few, so one key cannot grow an
// item without bound.
const MaxRememberedPerKey = 8

func sameSubject(a, b *Subject) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// Remember returns m with fact f (already attributed) accepted at now as
// the newest fact of its subject. m may be nil (nothing remembered under
// the key). It reports false, and changes nothing, when the same fact was
// already the newest of its subject and accepted no earlier than now.
func Remember(m *FactMemory, agentID string, f Fact, now time.Time) (*FactMemory, bool) {
	out := &FactMemory{AgentID: agentID, FactKey: f.FactKey}
	if m != nil {
		out.Version = m.Version
	}
	fc := f.clone()
	fc.ObservedAt = FormatTime(mustTime(f.ObservedAt))
	entry := RememberedFact{Fact: *fc, AcceptedAt: FormatTime(now)}
	out.Facts = append(out.Facts, entry)
	if m != nil {
		for _, e := range m.Facts {
			if sameSubject(e.Fact.Subject, f.Subject) {
				if e.Fact.ObservedAt == fc.ObservedAt && e.Fact.Source == fc.Source && !mustTime(e.AcceptedAt).Before(now) {
					return m, false
				}
				continue
			}
			if len(out.Facts) < MaxRememberedPerKey {
				out.Facts = append(out.Facts, e)
			}
		}
	}
	return out, true
}

// Newest returns when the newest remembered fact was accepted.
func (m *FactMemory) Newest() time.Time {
	var t time.Time
	for _, e := range m.Facts {
		if a := mustTime(e.AcceptedAt); a.After(t) {
			t = a
		}
	}
	return t
}

// Recall returns the newest remembered fact that the watcher accepted at
// or after since and that is on subject (or names none), with when it was
// accepted. m may be nil.
func (m *FactMemory) Recall(subject Subject, since time.Time) (Fact, time.Time, bool) {
	if m == nil {
		return Fact{}, time.Time{}, false
	}
	var best *RememberedFact
	for i := range m.Facts {
		e := &m.Facts[i]
		if e.Fact.Subject != nil && *e.Fact.Subject != subject {
			continue
		}
		at := mustTime(e.AcceptedAt)
		if at.Before(since) || best != nil && !at.After(mustTime(best.AcceptedAt)) {
			continue
		}
		best = e
	}
	if best == nil {
		return Fact{}, time.Time{}, false
	}
	return *best.Fact.clone(), mustTime(best.AcceptedAt), true
}

// LookbackKeys returns the fact keys whose memory a raise of req reads:
// those of satisfiedBy and refutedBy that ask for a lookback.
func (req RaiseRequest) LookbackKeys() []string {
	var out []string
	for _, e := range req.Expectations {
		if e.SatisfiedBy.Lookback != "" && e.SatisfiedBy.FactKey != "" {
			out = append(out, e.SatisfiedBy.FactKey)
		}
		if rb := e.RefutedBy; rb != nil && rb.Lookback != "" && rb.FactKey != "" {
			out = append(out, rb.FactKey)
		}
	}
	return out
}

// checkLookback validates a lookback window against the watcher's bound.
func checkLookback(c *errs.Collector, path, s string, cfg Config) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	if cfg.FactLookbackMax <= 0 {
		c.Add(path, "lookback is turned off on this watcher (-fact-lookback-max 0)")
		return 0, false
	}
	d, err := ParseDuration(s)
	if err != nil {
		c.Add(path, "%s", err.Error())
		return 0, false
	}
	span := d.AddTo(time.Unix(0, 0).UTC()).Sub(time.Unix(0, 0).UTC())
	if span <= 0 {
		c.Add(path, "must be a positive duration")
		return 0, false
	}
	if span > cfg.FactLookbackMax {
		c.Add(path, "is longer than this watcher's -fact-lookback-max (%s)", cfg.FactLookbackMax)
		return 0, false
	}
	return span, true
}

// applyLookback decides a new record from the facts remembered under its
// keys: the newest fact accepted within satisfiedBy.lookback before now
// satisfies it, and one within refutedBy.lookback lapses it "refuted";
// when both exist, the one accepted later decides. It returns the record
// (rec itself when nothing applied) and the effects of a satisfaction.
func applyLookback(rec *Record, remembered map[string]*FactMemory, now time.Time, cfg Config) (*Record, *Effects) {
	e := rec.Expectation
	var sat, ref Fact
	var satAt, refAt time.Time
	var okSat, okRef bool
	if d, ok := checkLookback(&errs.Collector{}, "", e.SatisfiedBy.Lookback, cfg); ok {
		sat, satAt, okSat = remembered[e.SatisfiedBy.FactKey].Recall(e.Subject, now.Add(-d))
	}
	if rb := e.RefutedBy; rb != nil {
		if d, ok := checkLookback(&errs.Collector{}, "", rb.Lookback, cfg); ok {
			ref, refAt, okRef = remembered[rb.FactKey].Recall(e.Subject, now.Add(-d))
		}
	}
	switch {
	case okRef && (!okSat || refAt.After(satAt)):
		out, _ := Refute(rec, ref, nil, now)
		return out, nil
	case okSat:
		out, eff := Satisfy(rec, sat, now)
		return out, &eff
	}
	return rec, nil
}
