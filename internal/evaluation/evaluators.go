package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/regrade"
	"github.com/agentclock/clockwork/internal/store"
)

// Online evaluators: criteria configured on an agent that grade a sample
// of its completed plans that declared no ANTICIPATE (regrade.Evaluator).
// An agent with an evaluator may send events for such plans (append.go);
// each sampled plan gets a VERIFY marked sampled, naming the evaluator,
// with no anticipation digest, and holding the stand-in ANTICIPATE its
// grades were made against (SampledBy).

// TypeEvaluator is the item type of an evaluator.
const TypeEvaluator = "evaluator"

// MaxEvaluators bounds an agent's evaluators.
const MaxEvaluators = 20

func evaluatorsPK(agent string) string { return "EVR#" + esc(agent) }
func evaluatorKey(agent, name string) store.Key {
	return store.Key{PK: evaluatorsPK(agent), SK: esc(name)}
}

// evaluatorNamesKey is the item naming an agent's evaluators: every
// create and delete reads and writes it, so the limit holds under
// concurrent creates. ("#" sorts before any evaluator's name.)
func evaluatorNamesKey(agent string) store.Key {
	return store.Key{PK: evaluatorsPK(agent), SK: "#names"}
}

const typeEvaluatorNames = "evaluator_names"

type evaluatorNames struct {
	Names []string `json:"names"`
}

// loadNames reads an agent's evaluator names in tx (version-tracked).
func loadNames(ctx context.Context, tx *store.Tx, agent string) (*evaluatorNames, error) {
	it, ok, err := tx.Get(ctx, evaluatorNamesKey(agent))
	if err != nil || !ok {
		return &evaluatorNames{}, err
	}
	return decode[evaluatorNames](it)
}

func putNames(tx *store.Tx, agent string, n *evaluatorNames) error {
	item, err := mkItem(evaluatorNamesKey(agent), typeEvaluatorNames, n, nil)
	if err == nil {
		tx.Put(item)
	}
	return err
}

// evaluatorVerificationsPK is the GSI1 partition of one evaluator's
// VERIFYs (the listing), sampledOfPK the GSI2 partition of every sampled
// VERIFY of an agent (erasure).
func evaluatorVerificationsPK(agent, name string) string {
	return "EVRV#" + esc(agent) + "#" + esc(name)
}
func sampledOfPK(agent string) string { return "SMP#" + esc(agent) }

// EvaluatorView is an evaluator as the API answers it.
type EvaluatorView struct {
	AgentID string `json:"agentId"`
	Name    string `json:"name"`
	regrade.EvaluatorBody
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
}

// SampledBy is what a sampled VERIFY was graded with: the evaluator, and
// the stand-in ANTICIPATE built from its criteria when it graded (kept,
// so that the judge's and people's later grades use the same criteria
// whatever the evaluator has become since).
type SampledBy struct {
	Evaluator    string          `json:"evaluator"`
	Anticipation json.RawMessage `json:"anticipation"`
}

func evaluatorItem(v *EvaluatorView) (store.Item, error) {
	return mkItem(evaluatorKey(v.AgentID, v.Name), TypeEvaluator, v, nil)
}

// PutEvaluator creates or replaces evaluator name of agentID (a PUT body)
// and reports whether it was created. It applies to plans completing
// afterwards. Errors: Invalid naming each failing field; Conflict past
// MaxEvaluators.
func (s *Service) PutEvaluator(ctx context.Context, agentID, name string, body []byte) (EvaluatorView, bool, error) {
	e, err := regrade.ParseEvaluator(agentID, name, body)
	if err != nil {
		return EvaluatorView{}, false, err
	}
	now := expect.FormatTime(s.now())
	out := EvaluatorView{AgentID: agentID, Name: name, EvaluatorBody: e.Body, CreatedAt: now, UpdatedAt: now}
	created := false
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, evaluatorKey(agentID, name))
		if err != nil {
			return err
		}
		created = !ok
		if ok {
			cur, err := decode[EvaluatorView](it)
			if err != nil {
				return err
			}
			out.CreatedAt = cur.CreatedAt
		} else {
			names, err := loadNames(ctx, tx, agentID)
			if err != nil {
				return err
			}
			if len(names.Names) >= MaxEvaluators {
				return errs.E(errs.Conflict, "agent %s has %d evaluators, the most it may; delete one first", agentID, MaxEvaluators)
			}
			names.Names = append(names.Names, name)
			if err := putNames(tx, agentID, names); err != nil {
				return err
			}
		}
		item, err := evaluatorItem(&out)
		if err != nil {
			return err
		}
		tx.Put(item)
		return nil
	})
	return out, created, wrap(err)
}

// Evaluator returns evaluator name of agentID. Errors: NotFound.
func (s *Service) Evaluator(ctx context.Context, agentID, name string) (EvaluatorView, error) {
	it, err := s.store.Get(ctx, evaluatorKey(agentID, name))
	if errors.Is(err, store.ErrNotFound) {
		return EvaluatorView{}, errs.E(errs.NotFound, "agent %s has no evaluator %q", agentID, name)
	}
	if err != nil {
		return EvaluatorView{}, wrap(err)
	}
	v, err := decode[EvaluatorView](it)
	if err != nil {
		return EvaluatorView{}, wrap(err)
	}
	return *v, nil
}

// Evaluators lists agentID's evaluators by name. Errors are the store's.
func (s *Service) Evaluators(ctx context.Context, agentID string) ([]EvaluatorView, error) {
	p, err := s.store.Query(ctx, store.Query{PK: evaluatorsPK(agentID), Limit: MaxEvaluators + 1})
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]EvaluatorView, 0, len(p.Items))
	for _, it := range p.Items {
		if it.Type != TypeEvaluator {
			continue // the names
		}
		v, err := decode[EvaluatorView](it)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, *v)
	}
	return out, nil
}

// DeleteEvaluator deletes evaluator name of agentID; its VERIFYs stay.
// Errors: NotFound.
func (s *Service) DeleteEvaluator(ctx context.Context, agentID, name string) error {
	err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		if _, ok, err := tx.Get(ctx, evaluatorKey(agentID, name)); err != nil || !ok {
			if err == nil {
				err = errs.E(errs.NotFound, "agent %s has no evaluator %q", agentID, name)
			}
			return err
		}
		names, err := loadNames(ctx, tx, agentID)
		if err != nil {
			return err
		}
		names.Names = slices.DeleteFunc(names.Names, func(n string) bool { return n == name })
		tx.Delete(evaluatorKey(agentID, name))
		return putNames(tx, agentID, names)
	})
	return wrap(err)
}

// evaluatorWants reports whether one of agentID's evaluators would grade
// a plan of that id and scope (sample aside): then its events are taken
// although no ANTICIPATE binds it.
func (s *Service) evaluatorWants(ctx context.Context, tx *store.Tx, agentID, planID, scope string) (bool, error) {
	p, err := tx.Query(ctx, store.Query{PK: evaluatorsPK(agentID), Limit: MaxEvaluators + 1})
	if err != nil {
		return false, err
	}
	for _, it := range p.Items {
		if it.Type != TypeEvaluator {
			continue
		}
		v, err := decode[EvaluatorView](it)
		if err != nil {
			return false, err
		}
		if v.Filter.Matches(planID, scope) {
			return true, nil
		}
	}
	return false, nil
}

// verifySampled grades a completed plan that declared no ANTICIPATE with
// each of its agent's evaluators that matches it and samples it, and
// stores one VERIFY per evaluator (idempotent: an existing one is left, its
// waiting jobs returned again). It returns the grading jobs to enqueue.
func (s *Service) verifySampled(ctx context.Context, ex *Execution) ([]GradeJob, error) {
	agent := ex.Owner()
	views, err := s.Evaluators(ctx, agent)
	if err != nil || len(views) == 0 {
		return nil, err
	}
	var jobs []GradeJob
	for _, view := range views {
		// The filter and the draw first: most plans are not sampled, and
		// parsing compiles the evaluator's assertions.
		probe := regrade.Evaluator{Name: view.Name, Body: view.EvaluatorBody}
		if view.Sample == nil || !probe.Matches(ex.PlanID, ex.ScopeID) || !probe.Sampled(agent, ex.PlanID) {
			continue
		}
		body, _ := json.Marshal(view.EvaluatorBody)
		e, err := regrade.ParseEvaluator(agent, view.Name, body)
		if err != nil {
			// One evaluator that cannot grade must neither hold up the
			// agent's others nor the change behind it: it is skipped.
			continue
		}
		vid := anticipate.SampledVerificationIDFor(agent, e.Name, ex.PlanID)
		existing, err := s.readVerification(ctx, vid)
		if err != nil {
			return nil, err
		}
		if existing != nil {
			jobs = append(jobs, jobsOf(existing)...)
			continue
		}
		vr, err := s.gradeSampled(ctx, ex, &e, vid)
		if errs.Is(err, errs.Invalid) {
			continue // cannot grade (see above)
		}
		if err != nil {
			return nil, err
		}
		item, err := verificationItem(vid, vr)
		if err != nil {
			return nil, wrap(err)
		}
		created, err := s.createVerification(ctx, vid, func(*store.Tx) (store.Item, *store.Write, error) {
			return s.withCreationMarker(item)
		})
		if errors.Is(err, store.ErrTooLarge) {
			continue // a VERIFY that can never be stored: as above
		}
		if err != nil {
			return nil, wrap(err)
		}
		if created {
			s.metrics.Record(metrics.Verifications, 1, string(vr.Verification.Verdict))
			jobs = append(jobs, jobsOf(vr)...)
		}
	}
	return jobs, nil
}

// gradeSampled grades ex with evaluator e as VERIFY vid: against the
// stand-in ANTICIPATE of e's criteria, sealed, marked sampled, with no
// anticipation digest.
func (s *Service) gradeSampled(ctx context.Context, ex *Execution, e *regrade.Evaluator, vid string) (*VerificationRecord, error) {
	agent := ex.Owner()
	raw, err := e.Anticipation(agent, ex.PlanID, s.now())
	if err != nil {
		return nil, err
	}
	a, err := anticipate.Validate(raw)
	if err != nil {
		return nil, errs.E(errs.Invalid, "the stand-in ANTICIPATE of evaluator %s: %s", e.Name, err.Error())
	}
	var w assertion.Watcher
	if s.watcher != nil {
		w = watcherEnv{ctx: ctx, r: s.watcher, agent: agent}
	}
	agg, err := s.aggregate(ctx, ex)
	if err != nil {
		return nil, wrap(err)
	}
	env := agg.Env(w)
	v := anticipate.Grade(a, a.Programs(), env, nil, anticipate.Execution{VerificationID: vid, PlanID: ex.PlanID, ExecutionDigest: ex.Head}, s.now())
	// No anticipation digest (nothing was declared before the run); the
	// stand-in's digest, signed with the VERIFY, ties it to its criteria.
	v.AnticipationDigest, v.CriteriaDigest, v.Sampled, v.Evaluator = "", a.DDNASignature, true, e.Name
	vr := &VerificationRecord{Sampled: &SampledBy{Evaluator: e.Name, Anticipation: raw}, ExpiresAt: s.sampledExpiry(ex)}
	s.awaitJudge(vr, &v, a, env)
	if err := s.seal(&v); err != nil {
		return nil, wrap(err)
	}
	vr.Verification = v
	return vr, nil
}

// sampledExpiry is when a sampled VERIFY is deleted: with its plan's
// evidence, -retain-evidence after PLAN_COMPLETE (never when evidence is
// kept forever).
func (s *Service) sampledExpiry(ex *Execution) string {
	if s.retain <= 0 {
		return ""
	}
	done, err := expect.ParseTime(ex.CompletedAt)
	if err != nil {
		done = s.now()
	}
	return expect.FormatTime(done.Add(s.retain))
}

// awaitJudge leaves the HEURISTIC criteria v still needs the judge for
// PENDING, waiting for the model judge (Judging) or saying that none is
// configured (JudgeErrors).
func (s *Service) awaitJudge(vr *VerificationRecord, v *anticipate.Verification, a *anticipate.Anticipation, env *assertion.Env) {
	pending := anticipate.JudgeRequests(*v, a, env)
	if len(pending) == 0 {
		return
	}
	reasons := map[string]string{}
	if !s.modelGrading {
		vr.JudgeErrors = reasons
	} else {
		vr.Judging = map[string]*JudgeAttempts{}
	}
	for _, jr := range pending {
		if !s.modelGrading {
			reasons[jr.CriterionID] = "no model judge is configured"
			continue
		}
		vr.Judging[jr.CriterionID] = &JudgeAttempts{NextAt: expect.FormatTime(s.now())}
		reasons[jr.CriterionID] = "awaiting the model judge"
	}
	annotatePending(v, reasons)
}

// gradedAgainst returns what a VERIFY was graded against: its sealed
// ANTICIPATE (read in tx when tx is not nil), or, for a sampled VERIFY,
// the stand-in kept with it. ok is false when a declared ANTICIPATE is no
// longer stored (erased).
func (s *Service) gradedAgainst(ctx context.Context, tx *store.Tx, vr *VerificationRecord) (rec *AnticipationRecord, a *anticipate.Anticipation, ok bool, err error) {
	v := vr.Verification
	if sb := vr.Sampled; sb != nil {
		digest, err := anticipate.Digest(sb.Anticipation)
		if err != nil {
			return nil, nil, false, err
		}
		rec = &AnticipationRecord{Anticipation: sb.Anticipation, Digest: digest, AgentID: v.AgentID, AnticipateID: v.AnticipationID,
			DeclaredBy: "evaluator:" + sb.Evaluator, Emitter: string(anticipate.EmitterExternalEvaluator)}
	} else if tx != nil {
		if rec, ok, err = loadAnticipation(ctx, tx, v.AgentID, v.AnticipationID); err != nil || !ok {
			return nil, nil, false, err
		}
	} else {
		rec, err = s.readAnticipation(ctx, v.AgentID, v.AnticipationID)
		if errs.Is(err, errs.NotFound) {
			return nil, nil, false, nil
		}
		if err != nil {
			return nil, nil, false, err
		}
	}
	a, err = s.compiled(rec)
	if err != nil {
		return nil, nil, false, err
	}
	return rec, a, true, nil
}

// EvaluatorVerificationsPage is a page of an evaluator's VERIFYs.
type EvaluatorVerificationsPage struct {
	Verifications []anticipate.Verification `json:"verifications"`
	NextToken     string                    `json:"nextToken,omitempty"`
}

// EvaluatorVerifications lists the VERIFYs evaluator name of agentID made
// (also after it was deleted), in verification id order, limit at a time
// (default and at most 100). Errors: Invalid naming nextToken.
func (s *Service) EvaluatorVerifications(ctx context.Context, agentID, name string, limit int, nextToken string) (EvaluatorVerificationsPage, error) {
	if limit <= 0 || limit > 100 {
		limit = 100
	}
	p, err := s.store.Query(ctx, store.Query{Index: store.GSI1, PK: evaluatorVerificationsPK(agentID, name), Limit: limit, After: nextToken})
	if errors.Is(err, store.ErrInvalid) {
		return EvaluatorVerificationsPage{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this listing gave"}})
	}
	if err != nil {
		return EvaluatorVerificationsPage{}, wrap(err)
	}
	out := EvaluatorVerificationsPage{Verifications: []anticipate.Verification{}, NextToken: p.Next}
	for _, it := range p.Items {
		vr, err := decode[VerificationRecord](it)
		if err != nil {
			return EvaluatorVerificationsPage{}, wrap(err)
		}
		out.Verifications = append(out.Verifications, vr.Verification)
	}
	return out, nil
}

// eraseEvaluators removes agentID's evaluators and sampled VERIFYs.
func (s *Service) eraseEvaluators(ctx context.Context, agentID string, count func(string, int)) error {
	if err := eachOf(ctx, s.store, store.Query{Index: store.GSI2, PK: sampledOfPK(agentID)}, func(it store.Item) error {
		n, err := s.deleteItem(ctx, it.Key)
		count(TypeVerification, n)
		return err
	}); err != nil {
		return err
	}
	return eachOf(ctx, s.store, store.Query{PK: evaluatorsPK(agentID)}, func(it store.Item) error {
		n, err := s.deleteItem(ctx, it.Key)
		count(it.Type, n)
		return err
	})
}
