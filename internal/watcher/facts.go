package watcher

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// Facts: reporting them (satisfying, refuting, remembering for lookback)
// and what a satisfaction implies for predecessors.

// FactOutcome reports what one fact satisfied.
type FactOutcome struct {
	FactKey   string   `json:"factKey"`
	Satisfied []string `json:"satisfied"`
	// Refuted lists the expectations the fact lapsed "refuted".
	Refuted []string `json:"refuted,omitempty"`
}

// ReportFacts applies facts reported by source (the authenticated
// reporter, which replaces any source in the body) for agentID, in order,
// atomically: satisfactions, skipped predecessors, re-anchored dependents
// and subject memory commit together. Errors: NotFound without a card;
// Invalid naming each failing fact field.
func (s *Service) ReportFacts(ctx context.Context, agentID, source string, facts []expect.Fact) ([]FactOutcome, error) {
	return s.reportFacts(ctx, agentID, source, facts, expect.ValidateFact)
}

// reportFacts is ReportFacts with the facts checked by validate.
func (s *Service) reportFacts(ctx context.Context, agentID, source string, facts []expect.Fact, validate func(*errs.Collector, string, expect.Fact, time.Time, expect.Config)) ([]FactOutcome, error) {
	if _, err := s.Card(ctx, agentID); err != nil {
		return nil, err
	}
	now := s.now()
	var c errs.Collector
	switch {
	case len(facts) == 0:
		c.Add("facts", "must hold at least one fact")
	case len(facts) > s.cfg.MaxPerRequest:
		c.Add("facts", "holds more than %d facts", s.cfg.MaxPerRequest)
	}
	for i, f := range facts {
		validate(&c, fmt.Sprintf("facts[%d]", i), f, now, s.cfg)
	}
	if err := c.Err("invalid facts"); err != nil {
		return nil, err
	}
	var out []FactOutcome
	var later []expect.Fact // facts whose memory did not fit the commit
	attributed := make([]expect.Fact, len(facts))
	for i, f := range facts {
		f.Source = source
		attributed[i] = f
	}
	err := s.update(ctx, agentID, func(st *txState) error {
		now := s.now()
		out = make([]FactOutcome, 0, len(facts))
		for _, f := range attributed {
			o, err := s.applyFact(st, f, now)
			if err != nil {
				return err
			}
			out = append(out, o)
		}
		if len(st.dirty)+len(st.dirtySub) > store.MaxCommitWrites {
			return errs.E(errs.Invalid, "these facts change more than %d records at once; report them in smaller batches", store.MaxCommitWrites)
		}
		later = st.deferFactMemories()
		return st.stage()
	})
	if err != nil {
		return nil, internal(err)
	}
	if err := s.rememberFacts(ctx, agentID, later); err != nil {
		return nil, internal(err)
	}
	return out, nil
}

// rememberFacts writes the memory of facts (already attributed) that did
// not fit the commit that applied them, in commits of their own, before
// the report is answered.
func (s *Service) rememberFacts(ctx context.Context, agentID string, facts []expect.Fact) error {
	for len(facts) > 0 {
		n := min(len(facts), store.MaxCommitWrites)
		part := facts[:n]
		facts = facts[n:]
		err := s.update(ctx, agentID, func(st *txState) error {
			now := s.now()
			for _, f := range part {
				st.remember(f, now)
			}
			return st.stage()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) applyFact(st *txState, f expect.Fact, now time.Time) (FactOutcome, error) {
	o := FactOutcome{FactKey: f.FactKey, Satisfied: []string{}}
	// One read finds the expectations the key satisfies and those it
	// refutes (their entries share a partition).
	candidates, err := st.lookup(factKeyPK(st.agent, f.FactKey), lookupFactKey, lookupRefute)
	if err != nil {
		return o, err
	}
	var matched, refuted []*expect.Record
	for _, r := range candidates {
		switch {
		case expect.Matches(f, r):
			matched = append(matched, r)
		case expect.Refutes(f, r):
			refuted = append(refuted, r)
		}
	}
	st.remember(f, now)
	// Subject memory first, so lapses decided below see this fact.
	var subs []expect.Subject
	if f.Subject != nil {
		subs = append(subs, *f.Subject)
	} else {
		for _, r := range slices.Concat(matched, refuted) {
			if !slices.Contains(subs, r.Expectation.Subject) {
				subs = append(subs, r.Expectation.Subject)
			}
		}
	}
	for _, sub := range subs {
		sr, err := st.subject(sub)
		if err != nil {
			return o, err
		}
		if nsr, changed := expect.ObserveFact(sr, f, len(matched)+len(refuted) > 0, now); changed {
			st.setSubject(nsr)
		}
	}
	for _, r := range refuted {
		sub, err := st.subject(r.Expectation.Subject)
		if err != nil {
			return o, err
		}
		if nr, changed := expect.Refute(r, f, sub, now); changed {
			st.set(nr)
			o.Refuted = append(o.Refuted, r.Expectation.ExpectationID)
		}
	}
	// Satisfy every match first, then check predecessors: expectations one
	// fact satisfies together are satisfied together, so none of them is
	// "skipped" by another, whatever the order of the matches.
	var effects []expect.Effects
	for _, r := range matched {
		nr, eff := expect.Satisfy(r, f, now)
		st.set(nr)
		effects = append(effects, eff)
		o.Satisfied = append(o.Satisfied, r.Expectation.ExpectationID)
	}
	for i, r := range matched {
		if err := st.skipPredecessors(r, effects[i].SkipCheck, now); err != nil {
			return o, err
		}
	}
	return o, nil
}

// skipPredecessors lapses "skipped" the open predecessors (preds, its
// "after" ids) of record r, which was just satisfied.
func (st *txState) skipPredecessors(r *expect.Record, preds []string, now time.Time) error {
	if len(preds) == 0 {
		return nil
	}
	sub, err := st.subject(r.Expectation.Subject)
	if err != nil {
		return err
	}
	for _, pid := range preds {
		p, err := st.record(pid)
		if err != nil {
			return err
		}
		if p == nil || !expect.AnchoredOn(r, p) {
			continue // none, or a later expectation of an id that expired
		}
		if np, changed := expect.Skip(p, []string{r.Expectation.ExpectationID}, sub, now); changed {
			st.set(np)
		}
	}
	return nil
}
