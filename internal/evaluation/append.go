package evaluation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	res, err := s.AppendEvents(ctx, planID, [][]byte{raw}, c)
	if err != nil {
		return Appended{}, err
	}
	return res[0].Appended, res[0].Err
}

// EventResult is what became of one event of a batch: its answer, or the
// error AppendEvent would have returned for it alone.
type EventResult struct {
	Appended
	Err error
}

// Bounds of one commit of AppendEvents, below the store's (DynamoDB: 100
// writes and 4 MB per transaction): room is kept for the execution, its
// effect marker and the checks of its bindings.
const (
	commitReserve   = 4
	commitEventSize = 2 << 20
)

// AppendEvents stores events of planID in order, as AppendEvent would one
// after the other, in as few commits as the store's limits allow: one for
// a batch of up to about 45 events (two writes each) and 2 MB. Each
// event's result is in the slot of its raw; an event refused (for any of
// AppendEvent's reasons) leaves the others appended. The error is the
// store's (nothing of the batch is then known to be stored: retry it,
// repeats are idempotent).
func (s *Service) AppendEvents(ctx context.Context, planID string, raws [][]byte, c Caller) ([]EventResult, error) {
	out := make([]EventResult, len(raws))
	var todo []pendingEvent
	for i, raw := range raws {
		p, err := prepareEvent(planID, raw)
		if err != nil {
			out[i].Err = err
			continue
		}
		p.slot = i
		todo = append(todo, p)
	}
	one := false // after an item too large, one event a commit finds which
	for len(todo) > 0 {
		var results []EventResult
		take := todo
		if one {
			take = todo[:1]
		}
		attempt := 0
		err := store.Update(ctx, s.store, func(tx *store.Tx) error {
			// The first attempt reads no event id: each id's write is a
			// conditional create, so a commit that meets a stored one (an
			// exporter's retry) conflicts, and the next attempt reads them.
			attempt++
			var err error
			results, err = s.appendSome(ctx, tx, planID, take, c, attempt == 1)
			return err
		})
		switch {
		case errors.Is(err, store.ErrTooLarge) && len(take) > 1:
			one = true
			continue
		case errors.Is(err, store.ErrTooLarge):
			results, one = []EventResult{{Err: err}}, false
		case err != nil && !errors.Is(err, errNothingWritten):
			return nil, wrap(err)
		}
		for k, r := range results {
			out[todo[k].slot] = r
		}
		todo = todo[len(results):]
	}
	return out, nil
}

// pendingEvent is an event of a batch, validated and digested.
type pendingEvent struct {
	slot  int
	ev    *anticipate.Event
	canon []byte
	hash  string
}

// prepareEvent validates raw as an event of planID and computes what its
// commit needs of it.
func prepareEvent(planID string, raw []byte) (pendingEvent, error) {
	ev, err := anticipate.ValidateEvent(raw)
	if err != nil {
		return pendingEvent{}, err
	}
	if err := ev.BindPlan(planID); err != nil {
		return pendingEvent{}, err
	}
	canon := ev.Canonical
	if canon == nil {
		if canon, err = anticipate.Canonical(ev.Raw); err != nil {
			return pendingEvent{}, err
		}
	}
	sum := sha256.Sum256(canon)
	return pendingEvent{ev: ev, canon: canon, hash: hex.EncodeToString(sum[:])}, nil
}

// errNothingWritten ends a commit of AppendEvents that refused every event
// it took (what it read then needs no check).
var errNothingWritten = errors.New("evaluation: no event of the commit was appended")

// appendSome takes the first events of todo into tx, as many as one
// commit holds and as long as they address the same agent's execution, and
// returns what became of each one taken (refused ones included). When
// optimistic, the event ids are not read (see AppendEvents). An error is
// the store's.
func (s *Service) appendSome(ctx context.Context, tx *store.Tx, planID string, todo []pendingEvent, c Caller, optimistic bool) ([]EventResult, error) {
	var (
		results []EventResult
		agents  = map[string]agentOrErr{}
		run     *appendRun
		size    int
	)
	for _, p := range todo {
		named := p.ev.AgentID
		a, ok := agents[named]
		if !ok {
			a.agent, a.err = planAgent(ctx, tx, planID, named, c)
			if a.err != nil && errs.CodeOf(a.err) == errs.Internal {
				return nil, a.err
			}
			agents[named] = a
		}
		if a.err != nil {
			results = append(results, EventResult{Err: a.err})
			continue
		}
		if a.agent == "" && p.ev.ScopeEnvelopeID == "" {
			results = append(results, EventResult{Err: errs.E(errs.NotFound, "no ANTICIPATE binds to plan %q (declare one with plan_id, or send scope_envelope_id with the first event)", planID)})
			continue
		}
		if a.agent == "" {
			results = append(results, EventResult{Err: errs.Fields("the agent of the plan is not known", []errs.FieldError{{Path: "agent_id",
				Message: fmt.Sprintf("is required: this token acts for several agents and none of them has declared or begun plan %q; name the agent whose scope envelope it runs under", planID)}})})
			continue
		}
		if run == nil {
			ex, exists, err := loadExecution(ctx, tx, a.agent, planID)
			if err != nil {
				return nil, err
			}
			run = &appendRun{s: s, tx: tx, planID: planID, agent: a.agent, ex: ex, exists: exists, optimistic: optimistic, staged: map[string]bool{}}
		} else if a.agent != run.agent {
			break // another execution: the next commit
		}
		if run.applied > 0 && (tx.Staged()+run.writesFor(p)+commitReserve > store.MaxCommitWrites || size+len(p.ev.Raw) > commitEventSize) {
			break
		}
		r, err := run.append(ctx, p)
		if err != nil {
			return nil, err
		}
		if r.Err == nil {
			size += len(p.ev.Raw)
		}
		results = append(results, r)
	}
	if run == nil || run.applied == 0 {
		return results, errNothingWritten
	}
	return results, run.finish()
}

// agentOrErr is the agent an event's agent_id resolves to, or why not.
type agentOrErr struct {
	agent string
	err   error
}

// appendRun is one commit's appends to one execution.
type appendRun struct {
	s             *Service
	tx            *store.Tx
	planID, agent string
	ex            *Execution
	exists        bool
	bound         []*AnticipationRecord
	boundScope    string
	boundLoaded   bool
	applied       int
	// optimistic skips reading each event id (see AppendEvents); staged
	// holds the ids staged by this run, read back from the transaction.
	optimistic bool
	staged     map[string]bool
}

// writesFor bounds the writes that appending p may stage.
func (r *appendRun) writesFor(p pendingEvent) int {
	n := 3 // the event, its id, a spilled chunk
	if !r.ex.Begun && (anticipate.SealsOn(p.ev.EventType) || p.ev.EventType == anticipate.PlanComplete) {
		n += len(r.bound) + MaxBound*boolInt(!r.boundLoaded)
	}
	if p.ev.EventType == anticipate.PlanComplete {
		n += len(r.ex.Bound)
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// append takes one event into the run: its result, refused or appended;
// an error is the store's.
func (r *appendRun) append(ctx context.Context, p pendingEvent) (EventResult, error) {
	ev, ex, tx := p.ev, r.ex, r.tx
	scope := ex.ScopeID
	if !r.exists {
		scope = ev.ScopeEnvelopeID
	}
	sealing := !ex.Begun && (anticipate.SealsOn(ev.EventType) || ev.EventType == anticipate.PlanComplete)
	if ex.Unbound {
		// Taken without an ANTICIPATE: none binds it now.
		r.bound, r.boundScope, r.boundLoaded = nil, scope, true
	} else if (!r.exists || sealing) && (!r.boundLoaded || r.boundScope != scope) {
		bound, err := r.s.bound(ctx, tx, r.planID, scope, r.agent)
		if err != nil {
			return EventResult{}, err
		}
		r.bound, r.boundScope, r.boundLoaded = bound, scope, true
	}
	if len(r.bound) == 0 && !r.exists {
		// A plan no ANTICIPATE binds is taken only when one of the
		// agent's online evaluators would grade it (evaluators.go).
		ok, err := r.s.evaluatorWants(ctx, tx, r.agent, r.planID, scope)
		if err != nil {
			return EventResult{}, err
		}
		if !ok {
			return EventResult{Err: errs.E(errs.NotFound, "no ANTICIPATE of agent %q binds to plan %q (declare one with plan_id, send scope_envelope_id with the first event, or give the agent an evaluator whose filter takes it: PUT /v1/agents/{agentId}/evaluators/{name})", r.agent, r.planID)}, nil
		}
		ex.Unbound = true
	}
	// A repeat is answered before any refusal, so the id is read whenever
	// the event would be refused; otherwise, on an optimistic attempt, it
	// is not: its write below is a conditional create.
	refusing := ex.Completed || sealing && len(r.bound) > MaxBound
	if !r.optimistic || r.staged[ev.EventID] || refusing {
		it, ok, err := tx.Get(ctx, eventIDKey(ex.pk, ev.EventID))
		if err != nil {
			return EventResult{}, err
		}
		if ok {
			prev, err := decode[eventIDRecord](it)
			if err != nil {
				return EventResult{}, err
			}
			if prev.Canonical != p.hash {
				return EventResult{Err: errs.E(errs.Conflict, "event_id %q was already stored for plan %q with another body", ev.EventID, r.planID)}, nil
			}
			return EventResult{Appended: Appended{ev.EventID, prev.Digest, prev.Seq}}, nil
		}
	}
	if ex.Completed {
		return EventResult{Err: errs.E(errs.Conflict, "plan %q already completed; its chain is closed", r.planID)}, nil
	}
	if sealing && len(r.bound) > MaxBound {
		return EventResult{Err: errs.E(errs.Invalid, "plan %q has %d bound anticipations; at most %d can be sealed together", r.planID, len(r.bound), MaxBound)}, nil
	}
	ex.ScopeID = scope
	now := r.s.now().Format(time.RFC3339Nano)
	if sealing {
		ex.Begun, ex.BegunAt = true, now
		ex.Bound = nil
		for _, b := range r.bound {
			ex.Bound = append(ex.Bound, b.AnticipateID)
			if !b.Sealed {
				b.Sealed, b.SealedAt, b.SealedBy = true, now, r.planID
			}
			b.Running++
			b.ExpiresAt = "" // kept while a plan it binds runs
			item, err := anticipationItem(b)
			if err != nil {
				return EventResult{}, err
			}
			tx.Put(item)
		}
	}
	seq := ex.Count + 1
	digest := anticipate.ChainDigestCanonical(ex.Head, p.canon)
	evItem, err := mkItem(eventKey(ex.pk, seq), TypeEvent, StoredEvent{Seq: seq, EventID: ev.EventID, Type: string(ev.EventType), Event: ev.Raw, Prev: ex.Head, Digest: digest}, nil)
	if err != nil {
		return EventResult{}, err
	}
	idItem, err := mkItem(eventIDKey(ex.pk, ev.EventID), TypeEventID, eventIDRecord{Seq: seq, Digest: digest, Canonical: p.hash}, nil)
	if err != nil {
		return EventResult{}, err
	}
	ex.Head, ex.Count = digest, seq
	ex.Aggregate.Add(ev)
	// The aggregate's growing part moves to an item of its own once it is
	// large, so that no item grows with the plan.
	if c, ok := ex.Aggregate.Spill(); ok {
		chunk, err := mkItem(chunkKey(ex.pk, ex.Aggregate.Chunks), TypeAggregateChunk, c, nil)
		if err != nil {
			return EventResult{}, err
		}
		tx.Put(chunk)
	}
	if ev.EventType == anticipate.PlanComplete {
		ex.Completed, ex.CompletedAt = true, now
		ex.ExpiresAt = r.s.evidenceExpiry()
		// The last event's items expire with it; the earlier ones are
		// stamped after VERIFY (retainEvidence).
		evItem, _ = expiring(evItem, nil)(ex.ExpiresAt)
		idItem, _ = expiring(idItem, nil)(ex.ExpiresAt)
		if err := completeBound(ctx, tx, ex, r.bound); err != nil {
			return EventResult{}, err
		}
	}
	tx.Put(evItem)
	tx.Put(idItem)
	r.staged[ev.EventID] = true
	r.exists = true
	r.applied++
	return EventResult{Appended: Appended{ev.EventID, digest, seq}}, nil
}

// finish stages the execution as the run left it, and the marker of its
// effects.
func (r *appendRun) finish() error {
	exItem, err := executionItem(r.ex)
	if err != nil {
		return err
	}
	r.tx.Put(exItem)
	// PLAN_COMPLETE's VERIFY must not depend on the stream alone.
	if r.s.markEffects {
		return effects.Stage(r.tx, exItem.Key, r.ex.version+1, r.s.now(), effects.Of(TypeExecution, nil, exItem.Data))
	}
	return nil
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
