package watcher

import (
	"context"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// The clock's entry points: an instant has come, evaluate its record.

// Tick evaluates one record against the watcher's clock, for an instant
// that has come. Early, repeated or stale instants change nothing.
func (s *Service) Tick(ctx context.Context, in expect.Instant) error {
	err := s.updateAsking(ctx, in.AgentID, func(st *txState, ans answers, final bool, need *[]*expect.Record) error {
		r, err := st.record(in.ExpectationID)
		if err != nil || r == nil || r.State != expect.StateOpen {
			return err
		}
		if handled, err := s.watchedTick(st, r, in, ans, final, need, s.now()); err != nil || handled {
			if err != nil {
				return err
			}
			return st.stage()
		}
		sub, err := st.subject(r.Expectation.Subject)
		if err != nil {
			return err
		}
		nr, changed, err := tickRecord(st, r, sub, s.now())
		if err != nil {
			return err
		}
		if changed {
			st.set(nr)
		}
		return st.stage()
	})
	return internal(err)
}

// tickRecord evaluates an open record against the clock, on its anchor as
// it is: when the anchor is satisfied, the record is first due from the
// anchor's observation (expect.Reanchor, which changes nothing once the
// change feed has re-anchored it). So a dependent whose re-anchoring the
// feed has not made yet (delayed, or its change lost after the retries
// AWS allows) is never lapsed on its old due time.
func tickRecord(st *txState, r *expect.Record, sub *expect.SubjectRecord, now time.Time) (*expect.Record, bool, error) {
	if a := r.Expectation.Anchor; a != nil {
		anchor, err := st.record(a.ExpectationID)
		if err != nil {
			return nil, false, err
		}
		if anchor != nil && anchor.SatisfiedBy != nil && expect.AnchoredOn(r, anchor) {
			if observed, err := expect.ParseTime(anchor.ObservedAt); err == nil {
				nr, changed := expect.Reanchor(r, observed, sub, now)
				return nr, changed, nil
			}
		}
	}
	nr, changed := expect.Tick(r, sub, now)
	return nr, changed, nil
}

// TickMany evaluates the records of several instants that have come,
// committing each agent's records together (one transaction for up to
// store.MaxCommitWrites/2 records), so a burst of instants costs a few
// commits rather than one each. Instants that have not come yet on the
// watcher's clock change nothing (TickDue returns them).
func (s *Service) TickMany(ctx context.Context, ins []expect.Instant) error {
	_, err := s.TickDue(ctx, ins)
	return err
}

// TickDue is TickMany that also returns the instants that have not come
// on the watcher's clock and are still their records' (expect.NotYet): the
// embedded clock arms them again instead of losing them. Errors are the
// store's.
func (s *Service) TickDue(ctx context.Context, ins []expect.Instant) ([]expect.Instant, error) {
	var notYet []expect.Instant
	byAgent := map[string][]expect.Instant{}
	var order []string
	for _, in := range ins {
		if _, ok := byAgent[in.AgentID]; !ok {
			order = append(order, in.AgentID)
		}
		byAgent[in.AgentID] = append(byAgent[in.AgentID], in)
	}
	// Each record may also write its subject, and its lapse's effect
	// marker (MarkEffects).
	chunk := store.MaxCommitWrites / 2
	if s.markEffects {
		chunk = store.MaxCommitWrites / 3
	}
	// tickPart evaluates one agent's instants in one commit, with the
	// answers of watched tasks asked so far; the records whose task is
	// still to be asked about are left for later (need).
	tickPart := func(agent string, part []expect.Instant, ans answers, final bool) (early []expect.Instant, need []*expect.Record, err error) {
		err = s.update(ctx, agent, func(st *txState) error {
			early, need = early[:0], need[:0]
			now := s.now()
			for _, in := range part {
				r, err := st.record(in.ExpectationID)
				if err != nil {
					return err
				}
				if r == nil || r.State != expect.StateOpen {
					continue
				}
				if handled, err := s.watchedTick(st, r, in, ans, final, &need, now); err != nil {
					return err
				} else if handled {
					continue
				}
				sub, err := st.subject(r.Expectation.Subject)
				if err != nil {
					return err
				}
				nr, changed, err := tickRecord(st, r, sub, now)
				if err != nil {
					return err
				}
				if changed {
					st.set(nr)
				}
				if expect.NotYet(nr, in, now) {
					early = append(early, in)
				}
			}
			return st.stage()
		})
		return early, need, err
	}
	// Every record whose instant asks nothing of an agent is evaluated
	// first; the watched tasks of the others are then asked about all at
	// once, outside any transaction, and their records evaluated with the
	// answers. So an agent slow to answer delays only the expectations
	// that watch its tasks.
	type later struct {
		agent string
		part  []expect.Instant
	}
	var again []later
	var asks []*expect.Record
	for _, agent := range order {
		list := byAgent[agent]
		for len(list) > 0 {
			part := list[:min(chunk, len(list))]
			list = list[len(part):]
			early, need, err := tickPart(agent, part, nil, false)
			if err != nil {
				return nil, internal(err)
			}
			notYet = append(notYet, early...)
			if len(need) > 0 {
				again = append(again, later{agent, part})
				asks = append(asks, need...)
			}
		}
	}
	if len(again) == 0 {
		return notYet, nil
	}
	ans := answers{}
	s.ask(ctx, asks, ans)
	seen := map[expect.Instant]bool{}
	for _, in := range notYet {
		seen[in] = true
	}
	for _, l := range again {
		// The records ticked in the first pass are unchanged by this one
		// (a repeated instant changes nothing).
		early, _, err := tickPart(l.agent, l.part, ans, true)
		if err != nil {
			return nil, internal(err)
		}
		for _, in := range early {
			if !seen[in] {
				seen[in] = true
				notYet = append(notYet, in)
			}
		}
	}
	return notYet, nil
}
