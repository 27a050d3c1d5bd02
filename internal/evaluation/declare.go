package evaluation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// Declared is the answer to a declaration.
type Declared struct {
	AnticipationID string `json:"anticipation_id"`
	Sealed         bool   `json:"sealed"`
	Digest         string `json:"digest"`
}

// Declare stores a new ANTICIPATE. It returns created=false for an
// identical re-submission. Errors: Invalid (the message, naming fields;
// including a wrong d_dna_signature); Forbidden for another agent;
// Conflict when the id exists with another body, or when its plan's
// execution has already begun.
func (s *Service) Declare(ctx context.Context, raw []byte, principal string, may Authorizer) (Declared, bool, error) {
	a, err := anticipate.Validate(raw)
	if err != nil {
		return Declared{}, false, err
	}
	if !may(a.AgentID) {
		return Declared{}, false, forbidden(a.AgentID)
	}
	var out Declared
	created := false
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, anticipationKey(a.AnticipationID))
		if err != nil {
			return err
		}
		if ok {
			rec, err := decode[AnticipationRecord](it)
			if err != nil {
				return err
			}
			existing, err := anticipate.Validate(rec.Anticipation)
			if err != nil {
				return err
			}
			if anticipate.Identical(existing, a) {
				out, created = Declared{a.AnticipationID, rec.Sealed, rec.Digest}, false
				return nil
			}
			if rec.Sealed {
				return errs.E(errs.Conflict, "anticipation %q is sealed; it can no longer change", a.AnticipationID)
			}
			return errs.E(errs.Conflict, "anticipation %q already exists with another body; PUT /v1/anticipations/%s to change it before its plan starts", a.AnticipationID, a.AnticipationID)
		}
		if err := s.checkPlanNotBegun(ctx, tx, a); err != nil {
			return err
		}
		rec := s.newRecord(a, principal)
		item, err := anticipationItem(rec)
		if err != nil {
			return err
		}
		if err := bumpBindGuard(ctx, tx, item); err != nil {
			return err
		}
		tx.Put(item)
		out, created = Declared{a.AnticipationID, false, rec.Digest}, true
		return nil
	})
	return out, created, wrap(err)
}

func (s *Service) newRecord(a *anticipate.Anticipation, principal string) *AnticipationRecord {
	return &AnticipationRecord{
		Anticipation: a.Raw, Digest: a.DDNASignature, Emitter: string(a.EffectiveEmitter()),
		DeclaredBy: principal, ReceivedAt: s.now().Format(time.RFC3339Nano), AgentID: a.AgentID,
		PlanID: a.PlanID, ScopeID: a.ScopeEnvelopeID, AnticipateID: a.AnticipationID,
	}
}

// bumpBindGuard writes the binding guard of the plan or scope the
// anticipation item binds to (see TypeBindGuard).
func bumpBindGuard(ctx context.Context, tx *store.Tx, item store.Item) error {
	key := bindGuardKey(item.Index[lookupBound].PK)
	g, _, err := tx.Get(ctx, key)
	if err != nil {
		return err
	}
	g.Key, g.Type = key, TypeBindGuard
	tx.Put(g)
	return nil
}

func (s *Service) checkPlanNotBegun(ctx context.Context, tx *store.Tx, a *anticipate.Anticipation) error {
	if a.PlanID == "" {
		return nil
	}
	// Only this agent's execution of the plan id matters: another agent's
	// plan of the same id is another plan.
	ex, exists, err := loadExecution(ctx, tx, a.AgentID, a.PlanID)
	if err != nil {
		return err
	}
	// The declaration commits only if the execution is still as read: a
	// first event committed meanwhile (which sealed what it found bound)
	// makes it run again and see the plan begun.
	tx.Check(executionKey(ex.pk))
	if !exists {
		tx.Check(executionKey(legacyExecutionPK(a.PlanID)))
		return nil
	}
	return anticipate.CheckNew(a, ex.Begun)
}

// Replace changes an unsealed ANTICIPATE (PUT). Errors: Invalid (including
// an id that differs from the path); NotFound (also for another agent's
// anticipation); Forbidden when the body names an agent the caller may not
// act for, whatever is stored; Conflict when it
// is sealed, or when the new plan's execution has begun. An identical body
// is an idempotent success.
func (s *Service) Replace(ctx context.Context, id string, raw []byte, principal string, may Authorizer) (Declared, error) {
	a, err := anticipate.Validate(raw)
	if err != nil {
		return Declared{}, err
	}
	if a.AnticipationID != id {
		return Declared{}, errs.Fields("invalid ANTICIPATE message", []errs.FieldError{{Path: "anticipation_id", Message: fmt.Sprintf("is %q but the path names %q", a.AnticipationID, id)}})
	}
	if !may(a.AgentID) {
		return Declared{}, forbidden(a.AgentID)
	}
	var out Declared
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, anticipationKey(id))
		if err != nil {
			return err
		}
		notFound := errs.E(errs.NotFound, "no anticipation %q; POST /v1/anticipations to declare it", id)
		if !ok {
			return notFound
		}
		rec, err := decode[AnticipationRecord](it)
		if err != nil {
			return err
		}
		if !may(rec.AgentID) {
			return notFound // another agent's answers as unknown
		}
		existing, err := anticipate.Validate(rec.Anticipation)
		if err != nil {
			return err
		}
		identical, err := anticipate.CheckUpdate(existing, a, rec.Sealed)
		if err != nil {
			return err
		}
		if identical {
			out = Declared{id, rec.Sealed, rec.Digest}
			return nil
		}
		if err := s.checkPlanNotBegun(ctx, tx, a); err != nil {
			return err
		}
		next := s.newRecord(a, principal)
		item, err := anticipationItem(next)
		if err != nil {
			return err
		}
		if err := bumpBindGuard(ctx, tx, item); err != nil {
			return err
		}
		tx.Put(item)
		out = Declared{id, false, next.Digest}
		return nil
	})
	return out, wrap(err)
}

// Anticipation returns a stored ANTICIPATE. Errors: NotFound for an
// unknown id, and exactly the same for another agent's.
func (s *Service) Anticipation(ctx context.Context, id string, may Authorizer) (*AnticipationRecord, error) {
	it, err := s.store.Get(ctx, anticipationKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.E(errs.NotFound, "no anticipation %q", id)
	}
	if err != nil {
		return nil, wrap(err)
	}
	rec, err := decode[AnticipationRecord](it)
	if err != nil {
		return nil, wrap(err)
	}
	if !may(rec.AgentID) {
		return nil, errs.E(errs.NotFound, "no anticipation %q", id) // as unknown
	}
	return rec, nil
}
