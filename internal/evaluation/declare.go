package evaluation

import (
	"context"
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
// identical re-submission. Anticipation ids are per agent: another agent's
// declaration of the same id is another anticipation, neither blocking nor
// revealed by this one. Errors: Invalid (the message, naming fields;
// including a wrong d_dna_signature); Forbidden for an agent_id the caller
// may not act for; Conflict when the agent's id exists with another body,
// or when its plan's execution has already begun.
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
		rec, ok, err := loadAnticipation(ctx, tx, a.AgentID, a.AnticipationID)
		if err != nil {
			return err
		}
		if ok {
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
		fresh := s.newRecord(a, principal)
		item, err := anticipationItem(fresh)
		if err != nil {
			return err
		}
		if err := bumpBindGuard(ctx, tx, item); err != nil {
			return err
		}
		tx.Put(item)
		out, created = Declared{a.AnticipationID, false, fresh.Digest}, true
		return nil
	})
	if err == nil && created {
		s.keepCompiled(out.Digest, a)
	}
	return out, created, wrap(err)
}

func (s *Service) newRecord(a *anticipate.Anticipation, principal string) *AnticipationRecord {
	return &AnticipationRecord{
		Anticipation: a.Raw, Digest: a.DDNASignature, Emitter: string(a.EffectiveEmitter()),
		DeclaredBy: principal, ReceivedAt: s.now().Format(time.RFC3339Nano), AgentID: a.AgentID,
		PlanID: a.PlanID, ScopeID: a.ScopeEnvelopeID, AnticipateID: a.AnticipationID, SessionID: a.SessionID,
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
	if ex.Unbound {
		return errs.E(errs.Conflict, "plan %q already runs without an ANTICIPATE (its events were taken for the agent's online evaluators); an ANTICIPATE declared now could name an outcome already seen: declare one before a plan's first event", a.PlanID)
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
		// The body's agent_id names whose anticipation this is; another
		// agent's of the same id answers as an unknown one.
		rec, ok, err := loadAnticipation(ctx, tx, a.AgentID, id)
		if err != nil {
			return err
		}
		if !ok {
			return errs.E(errs.NotFound, "no anticipation %q of agent %q; POST /v1/anticipations to declare it", id, a.AgentID)
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
		next.key = rec.key // where it was stored, also before ids were per agent
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

// Anticipation returns a stored ANTICIPATE: agentID's when it names one,
// else the caller's single agent's, else that of the one agent among those
// the caller acts for that declared id. Errors: NotFound for an unknown id,
// and exactly the same for another agent's; Forbidden when agentID names
// an agent the caller may not act for; Invalid naming agent_id when several
// of the caller's agents declared id.
func (s *Service) Anticipation(ctx context.Context, id, agentID string, c Caller) (*AnticipationRecord, error) {
	var rec *AnticipationRecord
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		agent, err := anticipationAgent(ctx, tx, id, agentID, c)
		if err != nil {
			return err
		}
		if agent == "" {
			return noAnticipation(id)
		}
		r, ok, err := loadAnticipation(ctx, tx, agent, id)
		if err != nil {
			return err
		}
		if !ok {
			return noAnticipation(id)
		}
		rec = r
		return nil
	})
	if err != nil {
		return nil, wrap(err)
	}
	return rec, nil
}
