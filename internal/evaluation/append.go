package evaluation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/effects"
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
// chain. The execution belongs to one agent (see planAgent): the event's
// agent_id, else the caller's single agent, else the one of the caller's
// agents that declared or runs the plan. The first TOOL_REQUEST or
// STEP_COMPLETE (or PLAN_COMPLETE, for a plan that completes without
// either) seals every ANTICIPATE of that agent bound to the plan, by plan
// or by scope envelope, in the same commit. A repeated event_id with the
// same body returns the stored answer. Errors: Invalid (naming fields; and
// agent_id when a caller acting for several agents must name it);
// NotFound when none of the agent's ANTICIPATEs binds to the plan;
// Forbidden when the event names an agent the caller may not act for;
// Conflict for a reused event_id with another body or an event after
// PLAN_COMPLETE.
func (s *Service) AppendEvent(ctx context.Context, planID string, raw []byte, c Caller) (Appended, error) {
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
		agent, err := planAgent(ctx, tx, planID, ev.AgentID, c)
		if err != nil {
			return err
		}
		if agent == "" && ev.ScopeEnvelopeID == "" {
			return errs.E(errs.NotFound, "no ANTICIPATE binds to plan %q (declare one with plan_id, or send scope_envelope_id with the first event)", planID)
		}
		if agent == "" {
			return errs.Fields("the agent of the plan is not known", []errs.FieldError{{Path: "agent_id",
				Message: fmt.Sprintf("is required: this token acts for several agents and none of them has declared or begun plan %q; name the agent whose scope envelope it runs under", planID)}})
		}
		ex, exists, err := loadExecution(ctx, tx, agent, planID)
		if err != nil {
			return err
		}
		if !exists {
			ex.ScopeID = ev.ScopeEnvelopeID
		}
		sealing := !ex.Begun && (anticipate.SealsOn(ev.EventType) || ev.EventType == anticipate.PlanComplete)
		var bound []*AnticipationRecord
		if !exists || sealing {
			if bound, err = s.bound(ctx, tx, planID, ex.ScopeID, agent); err != nil {
				return err
			}
		}
		if len(bound) == 0 && !exists {
			return errs.E(errs.NotFound, "no ANTICIPATE of agent %q binds to plan %q (declare one with plan_id, or send scope_envelope_id with the first event)", agent, planID)
		}
		if it, ok, err := tx.Get(ctx, eventIDKey(ex.pk, ev.EventID)); err != nil {
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
				if !b.Sealed {
					b.Sealed, b.SealedAt, b.SealedBy = true, now, planID
				}
				b.Running++
				b.ExpiresAt = "" // kept while a plan it binds runs
				item, err := anticipationItem(b)
				if err != nil {
					return err
				}
				tx.Put(item)
			}
		}
		seq := ex.Count + 1
		digest := anticipate.ChainDigestCanonical(ex.Head, canon)
		evItem, err := mkItem(eventKey(ex.pk, seq), TypeEvent, StoredEvent{Seq: seq, EventID: ev.EventID, Type: string(ev.EventType), Event: ev.Raw, Prev: ex.Head, Digest: digest}, nil)
		if err != nil {
			return err
		}
		idItem, err := mkItem(eventIDKey(ex.pk, ev.EventID), TypeEventID, eventIDRecord{Seq: seq, Digest: digest, Canonical: hash}, nil)
		if err != nil {
			return err
		}
		ex.Head, ex.Count = digest, seq
		ex.Aggregate.Add(ev)
		// The aggregate's growing part moves to an item of its own once
		// it is large, so that no item grows with the plan.
		if c, ok := ex.Aggregate.Spill(); ok {
			chunk, err := mkItem(chunkKey(ex.pk, ex.Aggregate.Chunks), TypeAggregateChunk, c, nil)
			if err != nil {
				return err
			}
			tx.Put(chunk)
		}
		if ev.EventType == anticipate.PlanComplete {
			ex.Completed, ex.CompletedAt = true, now
			ex.ExpiresAt = s.evidenceExpiry()
			// The last event's items expire with it; the earlier ones are
			// stamped after VERIFY (retainEvidence).
			evItem, _ = expiring(evItem, nil)(ex.ExpiresAt)
			idItem, _ = expiring(idItem, nil)(ex.ExpiresAt)
			if err := completeBound(ctx, tx, ex, bound); err != nil {
				return err
			}
		}
		exItem, err := executionItem(ex)
		if err != nil {
			return err
		}
		tx.Put(evItem)
		tx.Put(idItem)
		tx.Put(exItem)
		// PLAN_COMPLETE's VERIFY must not depend on the stream alone.
		if s.markEffects {
			if err := effects.Stage(tx, exItem.Key, ex.version+1, s.now(), effects.Of(TypeExecution, nil, exItem.Data)); err != nil {
				return err
			}
		}
		out = Appended{ev.EventID, digest, seq}
		return nil
	})
	return out, wrap(err)
}

// bound returns agentID's anticipations bound to a plan: by plan_id, and
// by the scope envelope for those declared without a plan. Another agent's
// declarations of the same plan id or scope never bind (an execution
// belongs to one agent). Each is tracked so that sealing it is a
// compare-and-set.
func (s *Service) bound(ctx context.Context, tx *store.Tx, planID, scopeID, agentID string) ([]*AnticipationRecord, error) {
	var out []*AnticipationRecord
	pks := []string{planBoundPK(planID)}
	if scopeID != "" {
		pks = append(pks, scopeBoundPK(scopeID))
	}
	for _, pk := range pks {
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
			rec, err := decodeAnticipation(cur)
			if err != nil {
				return nil, err
			}
			if rec.AgentID == agentID {
				out = append(out, rec)
			}
		}
	}
	return out, nil
}
