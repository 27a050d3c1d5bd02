package evaluation

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/effects"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/metrics"
	"github.com/agentclock/clockwork/internal/store"
)

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
	s.keepCompiled(rec.Digest, a)
	return a, nil
}

// keepCompiled caches a validated ANTICIPATE under its digest: Declare
// keeps what it validated, so that the VERIFY of a plan that runs soon
// after its declaration (a traced agent's usual case) does not validate
// and compile it again.
func (s *Service) keepCompiled(digest string, a *anticipate.Anticipation) {
	s.progMu.Lock()
	if len(s.programs) > 4096 {
		clear(s.programs)
	}
	s.programs[digest] = a
	s.progMu.Unlock()
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
// stores one VERIFY per anticipation. It makes no judge call: with a model
// judge, each pending HEURISTIC criterion is left PENDING ("awaiting the
// model judge") and handed to the Grader as its own job (GradeCriterion),
// so the VERIFY is stored within the change's processing however the judge
// fares. It is idempotent: a VERIFY that exists already is left as it is
// (its waiting jobs are enqueued again, which a replayed record may need
// when the first enqueue failed), so a replayed feed record produces no
// second VERIFY.
func (s *Service) Verify(ctx context.Context, agentID, planID string) error {
	ex, err := s.Execution(ctx, agentID, planID)
	if errs.Is(err, errs.NotFound) {
		return nil // a replayed record of an execution no longer stored
	}
	if err != nil {
		return err
	}
	if !ex.Completed {
		return nil
	}
	var jobs []GradeJob
	for _, antID := range ex.Bound {
		rec, err := s.readAnticipation(ctx, ex.Owner(), antID)
		if errs.Is(err, errs.NotFound) {
			continue // erased (with ?evidence=true) while the plan ran: nothing to grade against
		}
		if err != nil {
			return wrap(err)
		}
		vid := anticipate.VerificationIDFor(rec.Digest, planID)
		existing, err := s.readVerification(ctx, vid)
		if err != nil {
			return err
		}
		if existing != nil {
			jobs = append(jobs, jobsOf(existing)...)
			continue
		}
		a, err := s.compiled(rec)
		if err != nil {
			return err
		}
		var w assertion.Watcher
		if s.watcher != nil {
			w = watcherEnv{ctx: ctx, r: s.watcher, agent: a.AgentID}
		}
		agg, err := s.aggregate(ctx, ex)
		if err != nil {
			return wrap(err)
		}
		env := agg.Env(w)
		v := anticipate.Grade(a, a.Programs(), env, nil, anticipate.Execution{VerificationID: vid, PlanID: planID, ExecutionDigest: ex.Head}, s.now())
		vr := &VerificationRecord{}
		s.awaitJudge(vr, &v, a, env)
		vr.ExpiresAt = ex.ExpiresAt
		// The review items of its queued HUMAN criteria are opened in the
		// commit that creates it, so that no VERIFY waits on reviews no
		// one was asked for.
		var opened []*reviewItemRecord
		created, err := s.createVerification(ctx, vid, func(tx *store.Tx) (store.Item, *store.Write, error) {
			vv := v
			vv.Results = slices.Clone(v.Results)
			var err error
			if opened, err = s.stageReviewItems(ctx, tx, rec, a, &vv, s.now()); err != nil {
				return store.Item{}, nil, err
			}
			if err := s.seal(&vv); err != nil {
				return store.Item{}, nil, err
			}
			vr.Verification = vv
			item, err := verificationItem(vid, vr)
			if err != nil {
				return store.Item{}, nil, err
			}
			return s.withCreationMarker(item)
		})
		if err != nil {
			return wrap(err)
		}
		v = vr.Verification
		if !created {
			// Another run created it first, and enqueued its jobs: a
			// replayed change must not send the judge each criterion
			// twice. A job that run failed to enqueue is found by the
			// sweep (RepairGrading) or, embedded, by the grading worker,
			// which read the index.
			continue
		}
		for _, r := range opened {
			_ = s.keepDue(ctx, r) // else RepairReviews does it
		}
		s.metrics.Record(metrics.Verifications, 1, string(v.Verdict))
		jobs = append(jobs, jobsOf(vr)...)
	}
	if len(ex.Bound) == 0 {
		// No ANTICIPATE: the agent's online evaluators may sample it.
		sampled, err := s.verifySampled(ctx, ex)
		if err != nil {
			return err
		}
		jobs = append(jobs, sampled...)
	}
	if len(jobs) > 0 && s.grader != nil {
		if err := s.grader.Enqueue(ctx, jobs); err != nil {
			return fmt.Errorf("enqueue %d grading jobs: %w", len(jobs), err)
		}
	}
	return nil
}

// createVerification stores a new VERIFY, built in the commit by build
// (its item, its effect marker when it has one, and whatever else build
// stages), and reports whether this call created it: false when another
// run stored it first. A commit refused for a concurrent transaction
// (which is no proof that the VERIFY exists) is tried again after reading
// whether it does. Errors are build's and the store's.
func (s *Service) createVerification(ctx context.Context, vid string, build func(*store.Tx) (store.Item, *store.Write, error)) (created bool, err error) {
	attempt := 0
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		// The first attempt reads nothing: its put is a conditional
		// create, and a later one reads what made it fail.
		if attempt++; attempt > 1 {
			if _, ok, err := tx.Get(ctx, verificationKey(vid)); err != nil || ok {
				created = false
				return err
			}
		}
		item, marker, err := build(tx)
		if err != nil {
			return err
		}
		tx.Put(item)
		if marker != nil {
			tx.PutUnconditional(*marker.Put)
		}
		created = true
		return nil
	})
	return created, err
}

// withCreationMarker returns a new VERIFY's item with the marker of its
// effects, when it calls for one (a final verdict alerts) and
// Options.MarkEffects asks for markers: its alerts must not depend on the
// stream alone.
func (s *Service) withCreationMarker(item store.Item) (store.Item, *store.Write, error) {
	if !s.markEffects {
		return item, nil, nil
	}
	w, ok, err := effects.Write(item.Key, 1, s.now(), effects.Of(TypeVerification, nil, item.Data))
	if err != nil || !ok {
		return item, nil, err
	}
	return item, &w, nil
}

// SetGrader sets the grading queue (for a worker made after the
// service); call it before the service is used.
func (s *Service) SetGrader(g Grader) { s.grader = g }

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

// Verification returns one VERIFY. Errors: NotFound for an unknown id, and
// exactly the same for another agent's VERIFY.
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
		return nil, errs.E(errs.NotFound, "no verification %q", id)
	}
	return vr, nil
}

// Verifications lists the VERIFY messages of one anticipation, found as
// Anticipation finds it (its errors).
func (s *Service) Verifications(ctx context.Context, antID, agentID string, c Caller) ([]anticipate.Verification, error) {
	rec, err := s.Anticipation(ctx, antID, agentID, c)
	if err != nil {
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
			// The index is by anticipation id, which agents share.
			if vr.Verification.AgentID == rec.AgentID {
				out = append(out, vr.Verification)
			}
		}
		if p.Next == "" {
			return out, nil
		}
		q.After = p.Next
	}
}

// SubmitGrade records a HEURISTIC or HUMAN grade on a VERIFY and recomputes
// its verdict. Errors: NotFound (also for another agent's VERIFY); Invalid for an unknown
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
			return errs.E(errs.NotFound, "no verification %q", vid) // as unknown
		}
		_, a, ok, err := s.gradedAgainst(ctx, tx, vr)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("anticipation %s of verification %s is missing", vr.Verification.AnticipationID, vid)
		}
		if err := reviewedInQueue(ctx, tx, a, vid, criterionID); err != nil {
			return err
		}
		v, err := anticipate.ApplyGrade(vr.Verification, a.GradingPolicy, criterionID, score, rationale, gradedBy, s.now())
		if err != nil {
			return err
		}
		delete(vr.JudgeErrors, criterionID)
		delete(vr.Judging, criterionID) // a person's grade ends the wait for the judge
		if err := s.seal(&v); err != nil {
			return err
		}
		vr.Verification = v
		item, err := verificationItem(vid, vr)
		if err != nil {
			return err
		}
		tx.Put(item)
		if err := s.markVerification(tx, it, item); err != nil {
			return err
		}
		out = v
		return nil
	})
	if err == nil {
		s.metrics.Record(metrics.Grades, 1, string(out.Verdict))
	}
	return out, wrap(err)
}

// markVerification stages the marker of a VERIFY's change from old to
// next when it calls for effects (a verdict that became FAIL alerts) and
// Options.MarkEffects asks for markers.
func (s *Service) markVerification(tx *store.Tx, old, next store.Item) error {
	if !s.markEffects {
		return nil
	}
	return effects.Stage(tx, next.Key, old.Version+1, s.now(), effects.Of(TypeVerification, old.Data, next.Data))
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
	// The plan's evidence is given its expiry whatever VERIFY does (a
	// VERIFY that keeps failing must not keep the events forever), after
	// it, so the VERIFY and its grading jobs come first.
	owner := (&Execution{AgentID: ex.AgentID, Agents: ex.Agents}).Owner()
	verr := s.Verify(ctx, owner, ex.PlanID)
	return errors.Join(verr, s.retainEvidence(ctx, owner, ex.PlanID))
}

// executionDone is the part of an Execution that HandleChange reads.
type executionDone struct {
	PlanID    string   `json:"plan_id"`
	AgentID   string   `json:"agent_id"`
	Agents    []string `json:"agents"`
	Completed bool     `json:"completed"`
}
