package evaluation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// Appended is the answer to an event.
type Appended struct {
	EventID string `json:"event_id"`
	Digest  string `json:"digest"`
	Seq     int    `json:"seq"`
}

// MaxBound bounds the anticipations one execution seals (they commit
// atomically with the sealing event).
const MaxBound = 90

// AppendEvent stores one execution event of planID and extends its digest
// chain. The first TOOL_REQUEST or STEP_COMPLETE (or PLAN_COMPLETE, for a
// plan that completes without either) seals every ANTICIPATE bound to the
// plan in the same commit. A repeated event_id with the same body returns
// the stored answer. Errors: Invalid (naming fields); NotFound when no
// ANTICIPATE binds to the plan; Forbidden when the caller may act for none
// of the plan's agents; Conflict for a reused event_id with another body or
// an event after PLAN_COMPLETE.
func (s *Service) AppendEvent(ctx context.Context, planID string, raw []byte, may Authorizer) (Appended, error) {
	ev, err := anticipate.ValidateEvent(raw)
	if err != nil {
		return Appended{}, err
	}
	if err := ev.BindPlan(planID); err != nil {
		return Appended{}, err
	}
	canon := ev.Canonical
	if canon == nil {
		if canon, err = anticipate.Canonical(ev.Raw); err != nil {
			return Appended{}, err
		}
	}
	sum := sha256.Sum256(canon)
	hash := hex.EncodeToString(sum[:])
	var out Appended
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		exIt, exists, err := tx.Get(ctx, executionKey(planID))
		if err != nil {
			return err
		}
		ex := &Execution{PlanID: planID, ScopeID: ev.ScopeEnvelopeID}
		if exists {
			if ex, err = decode[Execution](exIt); err != nil {
				return err
			}
		}
		sealing := !ex.Begun && (anticipate.SealsOn(ev.EventType) || ev.EventType == anticipate.PlanComplete)
		var bound []*AnticipationRecord
		if !exists || sealing {
			if bound, err = s.bound(ctx, tx, planID, ex.ScopeID, ev.AgentID); err != nil {
				return err
			}
		}
		if len(bound) == 0 && !exists {
			return errs.E(errs.NotFound, "no ANTICIPATE binds to plan %q (declare one with plan_id, or send scope_envelope_id with the first event)", planID)
		}
		for _, b := range bound {
			ex.Agents = appendUnique(ex.Agents, b.AgentID)
		}
		// Authorise before answering anything about the plan's events.
		if !slices.ContainsFunc(ex.Agents, func(a string) bool { return may(a) }) {
			return errs.E(errs.Forbidden, "token may not act for the agents of plan %q", planID)
		}
		if it, ok, err := tx.Get(ctx, eventIDKey(planID, ev.EventID)); err != nil {
			return err
		} else if ok {
			prev, err := decode[eventIDRecord](it)
			if err != nil {
				return err
			}
			if prev.Canonical != hash {
				return errs.E(errs.Conflict, "event_id %q was already stored for plan %q with another body", ev.EventID, planID)
			}
			out = Appended{ev.EventID, prev.Digest, prev.Seq}
			return nil
		}
		if ex.Completed {
			return errs.E(errs.Conflict, "plan %q already completed; its chain is closed", planID)
		}
		now := s.now().Format(time.RFC3339Nano)
		if sealing {
			if len(bound) > MaxBound {
				return errs.E(errs.Invalid, "plan %q has %d bound anticipations; at most %d can be sealed together", planID, len(bound), MaxBound)
			}
			ex.Begun, ex.BegunAt = true, now
			ex.Bound = nil
			for _, b := range bound {
				ex.Bound = append(ex.Bound, b.AnticipateID)
				ex.Agents = appendUnique(ex.Agents, b.AgentID)
				if !b.Sealed {
					b.Sealed, b.SealedAt, b.SealedBy = true, now, planID
				}
				item, err := anticipationItem(b)
				if err != nil {
					return err
				}
				tx.Put(item)
			}
		}
		seq := ex.Count + 1
		digest := anticipate.ChainDigestCanonical(ex.Head, canon)
		evItem, err := mkItem(eventKey(planID, seq), TypeEvent, StoredEvent{Seq: seq, EventID: ev.EventID, Type: string(ev.EventType), Event: ev.Raw, Prev: ex.Head, Digest: digest}, nil)
		if err != nil {
			return err
		}
		idItem, err := mkItem(eventIDKey(planID, ev.EventID), TypeEventID, eventIDRecord{Seq: seq, Digest: digest, Canonical: hash}, nil)
		if err != nil {
			return err
		}
		ex.Head, ex.Count = digest, seq
		ex.Aggregate.Add(ev)
		if ev.EventType == anticipate.PlanComplete {
			ex.Completed, ex.CompletedAt = true, now
		}
		exItem, err := mkItem(executionKey(planID), TypeExecution, ex, nil)
		if err != nil {
			return err
		}
		tx.Put(evItem)
		tx.Put(idItem)
		tx.Put(exItem)
		out = Appended{ev.EventID, digest, seq}
		return nil
	})
	return out, wrap(err)
}

func appendUnique(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// bound returns the anticipations bound to a plan: by plan_id, and by the
// scope envelope for those declared without a plan. Each is tracked so
// that sealing it is a compare-and-set.
//
// A plan belongs to one agent: the agent_id of its plan-bound
// ANTICIPATEs, or else the agent_id sent with its events. Scope-bound
// ANTICIPATEs of other agents are not bound to it.
func (s *Service) bound(ctx context.Context, tx *store.Tx, planID, scopeID, eventAgent string) ([]*AnticipationRecord, error) {
	var out []*AnticipationRecord
	pks := []string{planBoundPK(planID)}
	if scopeID != "" {
		pks = append(pks, scopeBoundPK(scopeID))
	}
	planAgent := eventAgent
	for n, pk := range pks {
		// A declaration committing meanwhile changes the guard.
		if _, _, err := tx.Get(ctx, bindGuardKey(pk)); err != nil {
			return nil, err
		}
		tx.Check(bindGuardKey(pk))
		// Read consistently and tracked, so the seal is a compare-and-set.
		items, err := tx.Lookup(ctx, lookupBound, pk)
		if err != nil {
			return nil, err
		}
		for _, cur := range items {
			rec, err := decode[AnticipationRecord](cur)
			if err != nil {
				return nil, err
			}
			if n == 0 && planAgent == "" {
				planAgent = rec.AgentID
			}
			if n > 0 && planAgent != "" && rec.AgentID != planAgent {
				continue
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

// Execution returns a plan's execution state, or NotFound.
func (s *Service) Execution(ctx context.Context, planID string) (*Execution, error) {
	it, err := s.store.Get(ctx, executionKey(planID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.E(errs.NotFound, "no execution of plan %q", planID)
	}
	if err != nil {
		return nil, wrap(err)
	}
	return decode[Execution](it)
}
