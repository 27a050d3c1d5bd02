package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
)

// BundlePageSize is how many events one store read of an evidence bundle
// returns: a bundle is written page by page, so the memory it takes is
// bounded by one page, whatever the number of events.
const BundlePageSize = 100

// BundleParts is what an evidence bundle holds besides its events: the
// sealed ANTICIPATE as declared and the VERIFY.
type BundleParts struct {
	Anticipation json.RawMessage
	Verification json.RawMessage
	// AnticipationID and PlanID name the ANTICIPATE and the plan.
	AnticipationID string
	PlanID         string
	// Events is the length of the plan's chain.
	Events int
	// Execution is the plan's execution, whose events EachEvent reads.
	Execution *Execution
}

// Bundle returns the parts of the evidence bundle of a VERIFY; its events
// are read with EachEvent. Errors: NotFound for an unknown verification
// and for another agent's (the rules of Verification).
func (s *Service) Bundle(ctx context.Context, vid string, may Authorizer) (*BundleParts, error) {
	vr, err := s.Verification(ctx, vid, may)
	if err != nil {
		return nil, err
	}
	v := vr.Verification
	// A sampled VERIFY's bundle holds the evaluator's stand-in ANTICIPATE
	// (emitter external_evaluator, made after the run), and the VERIFY
	// says sampled with no anticipation_digest: never a declaration.
	rec, _, ok, err := s.gradedAgainst(ctx, nil, vr)
	if err == nil && !ok {
		err = noAnticipation(v.AnticipationID)
	}
	if err != nil {
		return nil, wrap(fmt.Errorf("anticipation %s of verification %s: %w", v.AnticipationID, vid, err))
	}
	ex, err := s.Execution(ctx, v.AgentID, v.PlanID)
	if err != nil {
		return nil, wrap(fmt.Errorf("execution of verification %s: %w", vid, err))
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, wrap(err)
	}
	return &BundleParts{Anticipation: rec.Anticipation, Verification: raw, AnticipationID: v.AnticipationID, PlanID: v.PlanID, Events: ex.Count, Execution: ex}, nil
}

// EachEvent calls fn with every stored event of a plan in chain order,
// reading the store BundlePageSize events at a time (readEvents, the read
// the events listing pages with too), and afterPage after each page (nil for
// none). It stops at, and returns, the first error.
func (s *Service) EachEvent(ctx context.Context, ex *Execution, fn func(StoredEvent) error, afterPage func() error) error {
	after := ""
	for {
		evs, next, err := s.readEvents(ctx, ex.pk, BundlePageSize, after)
		if err != nil {
			return wrap(err)
		}
		for _, ev := range evs {
			if err := fn(ev.StoredEvent); err != nil {
				return err
			}
		}
		if afterPage != nil {
			if err := afterPage(); err != nil {
				return err
			}
		}
		if next == "" {
			return nil
		}
		after = next
	}
}
