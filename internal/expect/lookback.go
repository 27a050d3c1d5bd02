package expect

import (
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

// FactMemory is the watcher's memory of the latest fact it accepted with
// one key on one subject (Subject nil: facts that name none), for
// expectations raised afterwards with a lookback. One memory per (key,
// subject) lets a report write it blind, with no read: the latest report
// wins. It is kept for Config.FactLookbackMax after the fact was accepted,
// and no longer.
type FactMemory struct {
	AgentID string   `json:"agentId"`
	FactKey string   `json:"factKey"`
	Subject *Subject `json:"subject,omitempty"`
	Fact    Fact     `json:"fact"`
	// AcceptedAt is when the watcher accepted the fact (its clock, not the
	// fact's observedAt).
	AcceptedAt string `json:"acceptedAt"`
}

// Remember returns the memory of fact f (already attributed) accepted at
// now.
func Remember(agentID string, f Fact, now time.Time) *FactMemory {
	fc := f.clone()
	fc.ObservedAt = FormatTime(mustTime(f.ObservedAt))
	m := &FactMemory{AgentID: agentID, FactKey: f.FactKey, Fact: *fc, AcceptedAt: FormatTime(now)}
	if f.Subject != nil {
		s := *f.Subject
		m.Subject = &s
	}
	return m
}

// Recall returns the newest fact among mems that the watcher accepted at
// or after since and that is on subject (or names none), with when it was
// accepted. mems may hold nils and memories of other subjects.
func Recall(mems []*FactMemory, subject Subject, since time.Time) (Fact, time.Time, bool) {
	var best *FactMemory
	for _, m := range mems {
		if m == nil || m.Subject != nil && *m.Subject != subject {
			continue
		}
		at := mustTime(m.AcceptedAt)
		if at.Before(since) || best != nil && !at.After(mustTime(best.AcceptedAt)) {
			continue
		}
		best = m
	}
	if best == nil {
		return Fact{}, time.Time{}, false
	}
	return *best.Fact.clone(), mustTime(best.AcceptedAt), true
}

// Lookback is one memory a raise reads: the facts with Key on Subject (or
// on none).
type Lookback struct {
	Key     string
	Subject Subject
}

// LookbackKeys returns the fact keys and subjects whose memories a raise
// of req reads: those of satisfiedBy and refutedBy that ask for a
// lookback.
func (req RaiseRequest) LookbackKeys() []Lookback {
	var out []Lookback
	for _, e := range req.Expectations {
		if e.SatisfiedBy.Lookback != "" && e.SatisfiedBy.FactKey != "" {
			out = append(out, Lookback{e.SatisfiedBy.FactKey, e.Subject})
		}
		if rb := e.RefutedBy; rb != nil && rb.Lookback != "" && rb.FactKey != "" {
			out = append(out, Lookback{rb.FactKey, e.Subject})
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
func applyLookback(rec *Record, remembered map[string][]*FactMemory, now time.Time, cfg Config) (*Record, *Effects) {
	e := rec.Expectation
	var sat, ref Fact
	var satAt, refAt time.Time
	var okSat, okRef bool
	if d, ok := checkLookback(&errs.Collector{}, "", e.SatisfiedBy.Lookback, cfg); ok {
		sat, satAt, okSat = Recall(remembered[e.SatisfiedBy.FactKey], e.Subject, now.Add(-d))
	}
	if rb := e.RefutedBy; rb != nil {
		if d, ok := checkLookback(&errs.Collector{}, "", rb.Lookback, cfg); ok {
			ref, refAt, okRef = Recall(remembered[rb.FactKey], e.Subject, now.Add(-d))
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
