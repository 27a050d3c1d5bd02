package evaluation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/assertion"
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
	for _, antID := range ex.Bound {
		rec, err := s.readAnticipation(ctx, ex.Owner(), antID)
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
			var err error
			if v, err = s.judgeAll(ctx, v, a, env, vr); err != nil {
				return wrap(err)
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

// judgeAll asks the judge for every pending HEURISTIC criterion of v, at
// most judgeParallel at once and within JudgeBudget in all, and applies
// the grades it gets. A criterion the judge fails, refuses or does not
// answer in time stays PENDING with the reason (vr.JudgeErrors), and the
// VERIFY is stored anyway: a slow or hanging judge costs its criteria a
// grade (which a person can submit), never the VERIFY, and never holds
// the change feed (on AWS the stream's batch, whose timeout would discard
// the record) longer than the budget.
func (s *Service) judgeAll(ctx context.Context, v anticipate.Verification, a *anticipate.Anticipation, env *assertion.Env, vr *VerificationRecord) (anticipate.Verification, error) {
	reqs := anticipate.JudgeRequests(v, a, env)
	if len(reqs) == 0 {
		return v, nil
	}
	budget := s.judgeBudget
	if budget <= 0 {
		budget = DefaultJudgeBudget
	}
	jctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	// Each call gets its share of the budget, so calls that hang cannot
	// keep the others from their turn.
	rounds := (len(reqs) + judgeParallel - 1) / judgeParallel
	perCall := budget / time.Duration(rounds)
	type answer struct {
		resp *anticipate.JudgeResponse
		err  error
	}
	answers := make([]answer, len(reqs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, judgeParallel)
	for i, jr := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-jctx.Done():
				answers[i].err = jctx.Err()
				return
			}
			cctx, cancel := context.WithTimeout(jctx, perCall)
			defer cancel()
			answers[i].resp, answers[i].err = s.judge.Judge(cctx, jr)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return v, ctx.Err()
	}
	for i, jr := range reqs {
		fail := func(reason string) {
			if vr.JudgeErrors == nil {
				vr.JudgeErrors = map[string]string{}
			}
			vr.JudgeErrors[jr.CriterionID] = reason
		}
		resp, err := answers[i].resp, answers[i].err
		if errors.Is(err, context.DeadlineExceeded) {
			fail(fmt.Sprintf("the model judge did not answer within %s (its share of the %s budget); submit a grade to complete the VERIFY", perCall, budget))
			continue
		}
		if err != nil {
			fail(err.Error())
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
			fail("the judge's grade was refused: " + err.Error())
			continue
		}
		if err != nil {
			return v, err
		}
		v = nv
	}
	return v, nil
}

// DefaultJudgeBudget bounds the model judge's part of one VERIFY (all its
// HEURISTIC criteria together), well inside the stream function's timeout.
const DefaultJudgeBudget = 60 * time.Second

// judgeParallel bounds the judge calls one VERIFY makes at once.
const judgeParallel = 4

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
		rec, ok, err := loadAnticipation(ctx, tx, vr.Verification.AgentID, vr.Verification.AnticipationID)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("anticipation %s of verification %s is missing", vr.Verification.AnticipationID, vid)
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
	return s.Verify(ctx, (&Execution{AgentID: ex.AgentID, Agents: ex.Agents}).Owner(), ex.PlanID)
}

// executionDone is the part of an Execution that HandleChange reads.
type executionDone struct {
	PlanID    string   `json:"plan_id"`
	AgentID   string   `json:"agent_id"`
	Agents    []string `json:"agents"`
	Completed bool     `json:"completed"`
}
