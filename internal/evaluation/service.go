// Package evaluation is the application service of the post-hoc evaluation
// loop (AIGP RFC-032): it stores ANTICIPATE declarations, seals them
// atomically with the first TOOL_REQUEST or STEP_COMPLETE of their plan,
// keeps each execution's digest chain, and runs VERIFY from the change feed
// when PLAN_COMPLETE is stored. Every rule lives in package anticipate; this
// package loads, applies and commits through store.Update.
package evaluation

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
)

// Judge grades HEURISTIC criteria. Implementations must never return a
// grade they did not get: an error leaves the criterion pending.
type Judge interface {
	Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error)
}

// WatcherReader answers the assertion functions that read the watcher's
// records of an agent.
type WatcherReader interface {
	ExpectationState(ctx context.Context, agentID, id string) (string, bool, error)
	LapseCount(ctx context.Context, agentID, kind string) (int, error)
}

// Service is the evaluation loop's application service.
type Service struct {
	store   store.Store
	now     func() time.Time
	judge   Judge
	watcher WatcherReader
	key     ed25519.PrivateKey
	metrics metrics.Recorder

	progMu   sync.Mutex
	programs map[string]*anticipate.Anticipation // by digest, compiled
}

// Options configure the service.
type Options struct {
	Now func() time.Time
	// Judge grades HEURISTIC criteria; nil leaves them pending.
	Judge Judge
	// Watcher answers expectation_state and lapse_count.
	Watcher WatcherReader
	// SigningKey, when set, adds an Ed25519 server_signature to VERIFY.
	SigningKey ed25519.PrivateKey
	// Metrics counts the VERIFYs created and the grades submitted, by
	// verdict (nil: none).
	Metrics metrics.Recorder
}

// New returns the service.
func New(st store.Store, opt Options) *Service {
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	return &Service{store: st, now: func() time.Time { return now().UTC() }, judge: opt.Judge,
		watcher: opt.Watcher, key: opt.SigningKey, metrics: metrics.Or(opt.Metrics), programs: map[string]*anticipate.Anticipation{}}
}

// PublicKey returns the VERIFY signing key's public half, or nil.
func (s *Service) PublicKey() ed25519.PublicKey {
	if s.key == nil {
		return nil
	}
	return s.key.Public().(ed25519.PublicKey)
}

// Authorizer tells whether the caller may act for an agent.
type Authorizer func(agentID string) bool

func forbidden(agentID string) error {
	return errs.E(errs.Forbidden, "token may not act for agent %q", agentID)
}

func wrap(err error) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	return fmt.Errorf("evaluation: %w", err)
}

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
	// A plan belongs to one agent: an ANTICIPATE naming another agent for
	// a plan already anticipated for an agent is refused.
	others, err := tx.Lookup(ctx, lookupBound, planBoundPK(a.PlanID))
	if err != nil {
		return err
	}
	for _, it := range others {
		other, err := decode[AnticipationRecord](it)
		if err != nil {
			return err
		}
		if other.AnticipateID != a.AnticipationID && other.AgentID != a.AgentID {
			return errs.E(errs.Conflict, "plan %q is anticipated for agent %q; an ANTICIPATE for agent %q cannot bind to it", a.PlanID, other.AgentID, a.AgentID)
		}
	}
	it, ok, err := tx.Get(ctx, executionKey(a.PlanID))
	if err != nil {
		return err
	}
	// The declaration commits only if the execution is still as read: a
	// first event committed meanwhile (which sealed what it found bound)
	// makes it run again and see the plan begun.
	tx.Check(executionKey(a.PlanID))
	if !ok {
		return nil
	}
	ex, err := decode[Execution](it)
	if err != nil {
		return err
	}
	return anticipate.CheckNew(a, ex.Begun)
}

// Replace changes an unsealed ANTICIPATE (PUT). Errors: Invalid (including
// an id that differs from the path); NotFound; Forbidden; Conflict when it
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
	var out Declared
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, anticipationKey(id))
		if err != nil {
			return err
		}
		if !ok {
			return errs.E(errs.NotFound, "no anticipation %q; POST /v1/anticipations to declare it", id)
		}
		rec, err := decode[AnticipationRecord](it)
		if err != nil {
			return err
		}
		if !may(rec.AgentID) || !may(a.AgentID) {
			return forbidden(a.AgentID)
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

// Anticipation returns a stored ANTICIPATE, or NotFound.
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
		return nil, forbidden(rec.AgentID)
	}
	return rec, nil
}

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

// compiled returns the validated, compiled ANTICIPATE of a record, cached
// by digest (assertions are compiled once and reused).
func (s *Service) compiled(rec *AnticipationRecord) (*anticipate.Anticipation, error) {
	s.progMu.Lock()
	a, ok := s.programs[rec.Digest]
	s.progMu.Unlock()
	if ok {
		return a, nil
	}
	a, err := anticipate.Validate(rec.Anticipation)
	if err != nil {
		return nil, fmt.Errorf("stored anticipation %s no longer validates: %w", rec.AnticipateID, err)
	}
	s.progMu.Lock()
	if len(s.programs) > 4096 {
		clear(s.programs)
	}
	s.programs[rec.Digest] = a
	s.progMu.Unlock()
	return a, nil
}

// watcherEnv adapts the watcher reader to one agent for the assertions.
type watcherEnv struct {
	ctx   context.Context
	r     WatcherReader
	agent string
}

func (w watcherEnv) ExpectationState(id string) (string, bool) {
	st, ok, err := w.r.ExpectationState(w.ctx, w.agent, id)
	return st, ok && err == nil
}

func (w watcherEnv) LapseCount(kind string) int {
	n, _ := w.r.LapseCount(w.ctx, w.agent, kind)
	return n
}

// Verify grades a completed plan against every ANTICIPATE it sealed and
// stores one VERIFY per anticipation. It is idempotent: a VERIFY that
// exists already is left as it is, so a replayed feed record produces no
// second VERIFY.
func (s *Service) Verify(ctx context.Context, planID string) error {
	ex, err := s.Execution(ctx, planID)
	if errs.Is(err, errs.NotFound) {
		return nil // a replayed record of an execution no longer stored
	}
	if err != nil {
		return err
	}
	if !ex.Completed {
		return nil
	}
	for _, antID := range ex.Bound {
		it, err := s.store.Get(ctx, anticipationKey(antID))
		if err != nil {
			return wrap(err)
		}
		rec, err := decode[AnticipationRecord](it)
		if err != nil {
			return wrap(err)
		}
		vid := anticipate.VerificationIDFor(rec.Digest, planID)
		if _, err := s.store.Get(ctx, verificationKey(vid)); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return wrap(err)
		}
		a, err := s.compiled(rec)
		if err != nil {
			return err
		}
		var w assertion.Watcher
		if s.watcher != nil {
			w = watcherEnv{ctx: ctx, r: s.watcher, agent: a.AgentID}
		}
		env := ex.Aggregate.Env(w)
		v := anticipate.Grade(a, a.Programs(), env, nil, anticipate.Execution{VerificationID: vid, PlanID: planID, ExecutionDigest: ex.Head}, s.now())
		vr := &VerificationRecord{}
		if s.judge != nil {
			for _, jr := range anticipate.JudgeRequests(v, a, env) {
				resp, err := s.judge.Judge(ctx, jr)
				if err != nil {
					if vr.JudgeErrors == nil {
						vr.JudgeErrors = map[string]string{}
					}
					vr.JudgeErrors[jr.CriterionID] = err.Error()
					continue
				}
				gradedBy := resp.GradedBy
				if gradedBy == "" {
					gradedBy = "model:judge"
				}
				nv, err := anticipate.ApplyCriterionGrade(v, a.GradingPolicy, jr.CriterionID,
					anticipate.CriterionGrade{Score: resp.Score, Rationale: resp.Rationale, GradedBy: gradedBy, PromptDigest: resp.PromptDigest}, s.now())
				if errs.Is(err, errs.Invalid) {
					// A grade the domain refuses (e.g. a graded_by past its
					// bound) leaves the criterion pending, like any judge
					// failure, rather than stopping the VERIFY.
					if vr.JudgeErrors == nil {
						vr.JudgeErrors = map[string]string{}
					}
					vr.JudgeErrors[jr.CriterionID] = "the judge's grade was refused: " + err.Error()
					continue
				}
				if err != nil {
					return wrap(err)
				}
				v = nv
			}
		} else if pending := anticipate.JudgeRequests(v, a, env); len(pending) > 0 {
			vr.JudgeErrors = map[string]string{}
			for _, jr := range pending {
				vr.JudgeErrors[jr.CriterionID] = "no model judge is configured"
			}
		}
		annotatePending(&v, vr.JudgeErrors)
		if err := s.seal(&v); err != nil {
			return wrap(err)
		}
		vr.Verification = v
		item, err := mkItem(verificationKey(vid), TypeVerification, vr, map[store.IndexName]store.IndexKey{
			store.GSI1: {PK: byAnticipationPK(antID), SK: esc(vid)},
		})
		if err != nil {
			return wrap(err)
		}
		err = s.store.Commit(ctx, []store.Write{store.PutIfAbsent(item)})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return wrap(err)
		}
		if err == nil { // a conflict: another run created it first
			s.metrics.Record(metrics.Verifications, 1, string(v.Verdict))
		}
	}
	return nil
}

// annotatePending puts the judge's failure reason in the evidence of each
// criterion it left pending.
func annotatePending(v *anticipate.Verification, reasons map[string]string) {
	for i := range v.Results {
		r := &v.Results[i]
		if reason, ok := reasons[r.CriterionID]; ok && r.Status == anticipate.StatusPending {
			r.Evidence = "pending: " + reason
		}
	}
}

// seal signs (when the server has a key) and then seals v, so that
// d_dna_signature covers server_signature: the seed's rule holds on the
// VERIFY as returned. Every change to a VERIFY (grading, a grade) ends here.
func (s *Service) seal(v *anticipate.Verification) error {
	if s.key != nil {
		return anticipate.SignEd25519(v, s.key)
	}
	return anticipate.Seal(v)
}

// Verification returns one VERIFY, or NotFound.
func (s *Service) Verification(ctx context.Context, id string, may Authorizer) (*VerificationRecord, error) {
	it, err := s.store.Get(ctx, verificationKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.E(errs.NotFound, "no verification %q", id)
	}
	if err != nil {
		return nil, wrap(err)
	}
	vr, err := decode[VerificationRecord](it)
	if err != nil {
		return nil, wrap(err)
	}
	if !may(vr.Verification.AgentID) {
		return nil, forbidden(vr.Verification.AgentID)
	}
	return vr, nil
}

// Verifications lists the VERIFY messages of one anticipation.
func (s *Service) Verifications(ctx context.Context, antID string, may Authorizer) ([]anticipate.Verification, error) {
	if _, err := s.Anticipation(ctx, antID, may); err != nil {
		return nil, err
	}
	out := []anticipate.Verification{}
	q := store.Query{Index: store.GSI1, PK: byAnticipationPK(antID), Limit: 1000}
	for {
		p, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, wrap(err)
		}
		for _, it := range p.Items {
			vr, err := decode[VerificationRecord](it)
			if err != nil {
				return nil, wrap(err)
			}
			out = append(out, vr.Verification)
		}
		if p.Next == "" {
			return out, nil
		}
		q.After = p.Next
	}
}

// SubmitGrade records a HEURISTIC or HUMAN grade on a VERIFY and recomputes
// its verdict. Errors: NotFound; Forbidden; Invalid for an unknown
// criterion or a score outside [0,1]; Conflict for a criterion already
// graded or a final verdict.
func (s *Service) SubmitGrade(ctx context.Context, vid, criterionID string, score float64, rationale, gradedBy string, may Authorizer) (anticipate.Verification, error) {
	var out anticipate.Verification
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, verificationKey(vid))
		if err != nil {
			return err
		}
		if !ok {
			return errs.E(errs.NotFound, "no verification %q", vid)
		}
		vr, err := decode[VerificationRecord](it)
		if err != nil {
			return err
		}
		if !may(vr.Verification.AgentID) {
			return forbidden(vr.Verification.AgentID)
		}
		ait, ok, err := tx.Get(ctx, anticipationKey(vr.Verification.AnticipationID))
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("anticipation %s of verification %s is missing", vr.Verification.AnticipationID, vid)
		}
		rec, err := decode[AnticipationRecord](ait)
		if err != nil {
			return err
		}
		a, err := s.compiled(rec)
		if err != nil {
			return err
		}
		v, err := anticipate.ApplyGrade(vr.Verification, a.GradingPolicy, criterionID, score, rationale, gradedBy, s.now())
		if err != nil {
			return err
		}
		delete(vr.JudgeErrors, criterionID)
		if err := s.seal(&v); err != nil {
			return err
		}
		vr.Verification = v
		item, err := mkItem(verificationKey(vid), TypeVerification, vr, it.Index)
		if err != nil {
			return err
		}
		tx.Put(item)
		out = v
		return nil
	})
	if err == nil {
		s.metrics.Record(metrics.Grades, 1, string(out.Verdict))
	}
	return out, wrap(err)
}

// HandleChange runs VERIFY when an execution's PLAN_COMPLETE is committed
// (the change-feed handler for execution records). It is idempotent.
func (s *Service) HandleChange(ctx context.Context, ch store.Change) error {
	if ch.New == nil {
		return nil
	}
	// Only whether the execution completed, and its plan: decoding these
	// two skips the aggregate, which every event's change carries.
	ex, err := decode[executionDone](*ch.New)
	if err != nil {
		return err
	}
	if !ex.Completed {
		return nil
	}
	return s.Verify(ctx, ex.PlanID)
}

// executionDone is the part of an Execution that HandleChange reads.
type executionDone struct {
	PlanID    string `json:"plan_id"`
	Completed bool   `json:"completed"`
}
