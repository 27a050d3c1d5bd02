package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/regrade"
	"github.com/agentclock/clockwork/internal/store"
)

// Bounds on one step of an evaluation: it grades at most evaluationStep
// plans, evaluationParallel at once, within evaluationStepBudget (less
// when its caller's deadline, a Lambda invocation's, comes sooner), and
// commits their results together (at most evaluationStepBytes of them,
// within the store's commit limits). A judge call the budget cuts leaves
// its criterion PENDING, so a step always commits and a job always moves
// on. maxStepFailures steps failing in a row fail the job.
const (
	evaluationStep        = 25
	evaluationParallel    = 4
	evaluationJudgeAtOnce = 4
	evaluationStepBudget  = 30 * time.Second
	evaluationStepMargin  = 20 * time.Second
	evaluationStepBytes   = 2 << 20
	maxEvaluationResultSz = 300 << 10
	maxStepFailures       = 5
)

// RunEvaluation runs one step of a job: it claims the step, grades the
// next plans and commits their results with the job's progress
// (conditionally on the progress it read, so a step that ran while
// another did commits nothing). It reports whether plans remain for this
// caller to carry on: false too when another delivery holds the step. A
// job that is not running (done, failed, unknown, erased) does nothing.
// Errors are the store's (each counts as a failed step; the job fails
// after maxStepFailures in a row); a plan that cannot be graded is a
// result with its error.
func (s *Service) RunEvaluation(ctx context.Context, id string) (more bool, err error) {
	rec, err := s.readEvaluation(ctx, id)
	if err != nil || rec == nil || rec.State != EvaluationRunning {
		return false, err
	}
	more, err = s.runStep(ctx, rec)
	if err != nil && ctx.Err() == nil {
		if ferr := s.stepFailed(ctx, rec, err); ferr != nil {
			return false, errors.Join(err, ferr)
		}
	}
	return more, err
}

func (s *Service) runStep(ctx context.Context, rec *EvaluationRecord) (bool, error) {
	id := rec.EvaluationID
	reqItem, err := s.store.Get(ctx, evaluationRequestKey(id))
	if err != nil {
		return false, wrap(err)
	}
	var req regrade.Request
	if err := json.Unmarshal(reqItem.Data, &req); err != nil {
		return false, s.failEvaluation(ctx, rec, "the stored request does not decode: "+err.Error())
	}
	spec, err := regrade.Parse(req)
	if err != nil {
		return false, s.failEvaluation(ctx, rec, "the stored request no longer validates: "+err.Error())
	}
	refs, err := s.evaluationPlans(ctx, id, rec.Done, min(evaluationStep, rec.Total-rec.Done))
	if err != nil {
		return false, err
	}
	budget := evaluationStepBudget
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, max(time.Until(dl)-evaluationStepMargin, time.Second))
	}
	// One delivery grades a step: a duplicate (a message delivered twice,
	// the sweep's repair racing a slow step) would call the judge again
	// for every plan. Its holder carries the job on; one that dies frees
	// the step when the claim expires, and the sweep enqueues it again. A
	// step that failed is claimed anew (the claim names the failures).
	if len(refs) > 0 {
		held, err := store.Claim(ctx, s.store, evaluationStepKey(id, rec.Done, rec.Failures), budget+store.ClaimMargin)
		if err != nil || !held {
			return false, wrap(err)
		}
	}
	judge := s.judge
	if spec.JudgeModel != "" && judge != nil {
		judge = nil
		if s.judgeWithModel != nil {
			if j, ok := s.judgeWithModel(spec.JudgeModel); ok {
				judge = j
			}
		}
	}
	created, _ := expect.ParseTime(rec.CreatedAt)
	gctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	results := make([]regrade.Result, len(refs))
	calls := make([]int, len(refs))
	failed := make([]error, len(refs))
	graded := make([]bool, len(refs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, evaluationParallel)
	for i, ref := range refs {
		sem <- struct{}{}
		if gctx.Err() != nil {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i], calls[i], failed[i] = s.regradePlan(ctx, gctx, rec.EvaluationID, created, ref, spec, judge)
			graded[i] = failed[i] == nil
		}()
	}
	wg.Wait()
	// The results commit in plan order: stop at the first plan not graded.
	n, size := 0, 0
	var items []store.Item
	var stored []regrade.Result
	judgeCalls := 0
	for n < len(refs) && graded[n] {
		it, r, err := s.resultItem(rec, rec.Done+n, results[n])
		if err != nil {
			return false, wrap(err)
		}
		if size += len(it.Data); size > evaluationStepBytes && n > 0 {
			break
		}
		items, stored = append(items, it), append(stored, r)
		judgeCalls += calls[n]
		n++
	}
	if n == 0 && len(refs) > 0 {
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		if failed[0] != nil {
			return false, failed[0]
		}
		return false, fmt.Errorf("evaluation %s: no plan graded in this step", id)
	}
	from := rec.Done
	var stillRunning bool
	err = store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, evaluationKey(id))
		if err != nil || !ok {
			stillRunning = false
			return err // erased meanwhile: nothing to write
		}
		cur, err := decode[EvaluationRecord](it)
		if err != nil {
			return err
		}
		if cur.State != EvaluationRunning || cur.Done != from {
			stillRunning = cur.State == EvaluationRunning
			return nil // another step committed these plans first
		}
		for i, r := range items {
			tx.PutUnconditional(r)
			cur.Tally.Add(stored[i])
		}
		cur.Done += n
		cur.Failures = 0
		cur.JudgeCalls += judgeCalls
		cur.UpdatedAt = expect.FormatTime(s.now())
		if cur.Done >= cur.Total {
			cur.State, cur.FinishedAt = EvaluationDone, cur.UpdatedAt
		}
		stillRunning = cur.State == EvaluationRunning
		next, err := evaluationItem(cur)
		if err != nil {
			return err
		}
		tx.Put(next)
		return nil
	})
	if err != nil {
		return false, wrap(err)
	}
	return stillRunning, nil
}

// stepFailed counts a failed step on the job, and fails the job once
// maxStepFailures steps failed in a row: a step that can never succeed
// must not come back (with its judge calls) forever.
func (s *Service) stepFailed(ctx context.Context, rec *EvaluationRecord, cause error) error {
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, evaluationKey(rec.EvaluationID))
		if err != nil || !ok {
			return err
		}
		cur, err := decode[EvaluationRecord](it)
		if err != nil || cur.State != EvaluationRunning || cur.Done != rec.Done || cur.Failures != rec.Failures {
			return err // moved on meanwhile
		}
		cur.Failures++
		cur.UpdatedAt = expect.FormatTime(s.now())
		if cur.Failures >= maxStepFailures {
			cur.State, cur.FinishedAt = EvaluationFailed, cur.UpdatedAt
			cur.Error = clipReason(fmt.Sprintf("the step from plan %d failed %d times in a row; the last time: %v", cur.Done+1, cur.Failures, cause))
		}
		next, err := evaluationItem(cur)
		if err != nil {
			return err
		}
		tx.Put(next)
		return nil
	})
}

// resultItem is a result's item and the result as stored: one too large
// for an item is stored without its signed VERIFY (saying so in Omitted),
// and then as not graded. The summary counts what is stored. The item
// expires with the job, or with the plan's evidence when that is sooner.
func (s *Service) resultItem(rec *EvaluationRecord, seq int, r regrade.Result) (store.Item, regrade.Result, error) {
	expires := rec.ExpiresAt
	if r.ExpiresAt != "" && (expires == "" || r.ExpiresAt < expires) {
		expires = r.ExpiresAt
	}
	for attempt := 0; ; attempt++ {
		it, err := expiring(mkItem(evaluationResultKey(rec.EvaluationID, seq), TypeEvaluationResult, r, nil))(expires)
		if err != nil || len(it.Data) <= maxEvaluationResultSz || attempt == 2 {
			return it, r, err
		}
		if attempt == 0 {
			r.Omitted = fmt.Sprintf("verification: the signed record makes the result %d bytes, over the %d a result may take", len(it.Data), maxEvaluationResultSz)
			r.Verification = nil
			continue
		}
		r = regrade.Result{PlanID: r.PlanID, AgentID: r.AgentID, OriginalVerdict: r.OriginalVerdict, OriginalScore: r.OriginalScore,
			OriginalVerificationID: r.OriginalVerificationID, Criteria: []anticipate.Result{},
			Error: fmt.Sprintf("the result is %d bytes, over the %d a result may take: grade fewer criteria at once", len(it.Data), maxEvaluationResultSz)}
	}
}

// evaluationStepKey is the claim on the step that grades from plan done
// after failures failed attempts.
func evaluationStepKey(id string, done, failures int) store.Key {
	return store.Key{PK: evaluationPK(id), SK: fmt.Sprintf("STEP#%06d#%d", done, failures)}
}

// evaluationPlans reads n plans of a job's list from index from.
func (s *Service) evaluationPlans(ctx context.Context, id string, from, n int) ([]PlanRef, error) {
	var out []PlanRef
	for len(out) < n {
		i := from + len(out)
		it, err := s.store.Get(ctx, evaluationPlansKey(id, i/evaluationChunk))
		if err != nil {
			return nil, wrap(err)
		}
		var chunk []PlanRef
		if err := json.Unmarshal(it.Data, &chunk); err != nil {
			return nil, wrap(err)
		}
		if i%evaluationChunk >= len(chunk) {
			return nil, fmt.Errorf("evaluation %s: plan %d is not in its list", id, i)
		}
		take := chunk[i%evaluationChunk:]
		out = append(out, take[:min(len(take), n-len(out))]...)
	}
	return out, nil
}

// failEvaluation ends a job that can never finish.
func (s *Service) failEvaluation(ctx context.Context, rec *EvaluationRecord, reason string) error {
	return store.Update(ctx, s.store, func(tx *store.Tx) error {
		it, ok, err := tx.Get(ctx, evaluationKey(rec.EvaluationID))
		if err != nil || !ok {
			return err
		}
		cur, err := decode[EvaluationRecord](it)
		if err != nil || cur.State != EvaluationRunning {
			return err
		}
		cur.State, cur.Error = EvaluationFailed, reason
		cur.UpdatedAt = expect.FormatTime(s.now())
		cur.FinishedAt = cur.UpdatedAt
		next, err := evaluationItem(cur)
		if err != nil {
			return err
		}
		tx.Put(next)
		return nil
	})
}

// regradePlan grades one plan against the evaluation's criteria, as VERIFY
// would (anticipate.Grade over the stored aggregate), calling the judge
// for its HEURISTIC criteria (a few at once, bounded by the evaluation
// judge rate; a call that step, the step's context, cuts leaves its
// criterion PENDING) and sealing and signing the result. It returns the
// judge calls made. Errors are the store's (read with ctx); a plan that
// cannot be graded is a result with Error.
func (s *Service) regradePlan(ctx, step context.Context, evaluationID string, at time.Time, ref PlanRef, spec regrade.Spec, judge Judge) (regrade.Result, int, error) {
	out := regrade.Result{PlanID: ref.PlanID, AgentID: ref.AgentID, Criteria: []anticipate.Result{}}
	ex, err := s.Execution(ctx, ref.AgentID, ref.PlanID)
	if errs.Is(err, errs.NotFound) {
		out.Error = "the plan's execution is no longer stored (erased, or past its retention)"
		return out, 0, nil
	}
	if err != nil {
		return out, 0, err
	}
	out.ExpiresAt = ex.ExpiresAt
	plan := regrade.Plan{AgentID: ref.AgentID, PlanID: ref.PlanID}
	for _, antID := range ex.Bound {
		rec, err := s.readAnticipation(ctx, ex.Owner(), antID)
		if errs.Is(err, errs.NotFound) {
			continue
		}
		if err != nil {
			return out, 0, wrap(err)
		}
		orig, err := s.compiled(rec)
		if err != nil {
			return out, 0, err
		}
		plan.Original = orig
		vid := anticipate.VerificationIDFor(rec.Digest, ref.PlanID)
		if vr, err := s.readVerification(ctx, vid); err != nil {
			return out, 0, err
		} else if vr != nil {
			out.OriginalVerificationID = vid
			out.OriginalVerdict = vr.Verification.Verdict
			sc := vr.Verification.Score
			out.OriginalScore = &sc
		}
		break
	}
	raw, err := regrade.Anticipation(plan, evaluationID, at, spec)
	if err != nil {
		out.Error = err.Error()
		return out, 0, nil
	}
	a, err := anticipate.Validate(raw)
	if err != nil {
		// The plan's own policy with these criteria (weights all 0 under
		// its weighted_scoring, say).
		out.Error = "the criteria cannot be graded with this plan's grading policy: " + err.Error()
		return out, 0, nil
	}
	var w assertion.Watcher
	if s.watcher != nil {
		w = watcherEnv{ctx: ctx, r: s.watcher, agent: a.AgentID}
	}
	agg, err := s.aggregate(ctx, ex)
	if err != nil {
		return out, 0, wrap(err)
	}
	env := agg.Env(w)
	exec := anticipate.Execution{VerificationID: regrade.ResultID(evaluationID, ref.AgentID, ref.PlanID), PlanID: ref.PlanID, ExecutionDigest: ex.Head}
	v := anticipate.Grade(a, a.Programs(), env, nil, exec, s.now())
	calls := 0
	if pending := anticipate.JudgeRequests(v, a, env); len(pending) > 0 {
		grades, reasons, n := s.judgeAll(step, judge, spec.JudgeModel, pending)
		if ctx.Err() != nil {
			return out, n, ctx.Err()
		}
		calls = n
		v = anticipate.Grade(a, a.Programs(), env, grades, exec, s.now())
		annotatePending(&v, reasons)
	}
	if err := s.seal(&v); err != nil {
		return out, calls, wrap(err)
	}
	out.Verdict, out.Criteria, out.Verification = v.Verdict, v.Results, &v
	score := v.Score
	out.Score = &score
	return out, calls, nil
}

// judgeAll asks the judge for each request, evaluationJudgeAtOnce at a
// time within the evaluation judge rate, until step ends. It returns the
// grades, why each criterion without one has none, and the calls made.
func (s *Service) judgeAll(step context.Context, judge Judge, model string, reqs []anticipate.JudgeRequest) (map[string]anticipate.CriterionGrade, map[string]string, int) {
	grades := map[string]anticipate.CriterionGrade{}
	reasons := map[string]string{}
	if judge == nil {
		reason := "no model judge is configured"
		if model != "" {
			reason = fmt.Sprintf("the configured judge cannot grade with model %q", model)
		}
		for _, jr := range reqs {
			reasons[jr.CriterionID] = reason
		}
		return grades, reasons, 0
	}
	const cut = "not graded within the step's time: run the evaluation again for it"
	var mu sync.Mutex
	var wg sync.WaitGroup
	calls := 0
	sem := make(chan struct{}, evaluationJudgeAtOnce)
	for _, jr := range reqs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			var g *anticipate.CriterionGrade
			reason := ""
			if err := s.evalJudgeCalls.Wait(step); err != nil {
				reason = cut
			} else {
				cctx, cancel := context.WithTimeout(step, s.retry.CallTimeout)
				resp, err := judge.Judge(cctx, jr)
				cancel()
				mu.Lock()
				calls++
				mu.Unlock()
				switch {
				case err != nil && step.Err() != nil:
					reason = cut
				case err != nil:
					reason = clipReason("the model judge did not grade it: " + err.Error())
				default:
					gradedBy := resp.GradedBy
					if gradedBy == "" {
						gradedBy = "model:judge"
					}
					g = &anticipate.CriterionGrade{Score: resp.Score, Rationale: resp.Rationale, GradedBy: gradedBy, PromptDigest: resp.PromptDigest}
				}
			}
			mu.Lock()
			if g != nil {
				grades[jr.CriterionID] = *g
			} else {
				reasons[jr.CriterionID] = reason
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return grades, reasons, calls
}

// RepairEvaluations enqueues again the running jobs that made no progress
// for late (their message lost, or their step failing) and returns how
// many it enqueued.
func (s *Service) RepairEvaluations(ctx context.Context, e Evaluator, late time.Duration, limit int) (int, error) {
	ids, err := s.RunningEvaluations(ctx, s.now().Add(-late), limit)
	if err != nil {
		return 0, err
	}
	for i, id := range ids {
		if err := e.EnqueueEvaluation(ctx, id); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}

// EvaluationMessage is the grading queue's message of one evaluation step
// (beside the GradeJobs).
type EvaluationMessage struct {
	EvaluationID string `json:"evaluationId"`
}

// ParseEvaluationMessage reports whether a grading queue body is an
// evaluation step, and which.
func ParseEvaluationMessage(body string) (string, bool) {
	var m EvaluationMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.EvaluationID == "" {
		return "", false
	}
	return m.EvaluationID, true
}

// EvaluationWorker is the embedded runtime's evaluation queue: it finds
// the running jobs in the store (so a restart continues them) and runs
// their steps, one job at a time. EnqueueEvaluation only wakes it.
type EvaluationWorker struct {
	svc  *Service
	log  *slog.Logger
	wake chan struct{}
	// Idle is the longest it sleeps without looking (default 30 s).
	Idle time.Duration
}

// NewEvaluationWorker returns the worker of svc and makes it svc's
// Evaluator.
func NewEvaluationWorker(svc *Service, log *slog.Logger) *EvaluationWorker {
	w := &EvaluationWorker{svc: svc, log: log, wake: make(chan struct{}, 1), Idle: 30 * time.Second}
	svc.SetEvaluator(w)
	return w
}

// EnqueueEvaluation wakes the worker; the job is already stored.
func (w *EvaluationWorker) EnqueueEvaluation(context.Context, string) error {
	wake(w.wake)
	return nil
}

// Run runs evaluations until ctx ends.
func (w *EvaluationWorker) Run(ctx context.Context) {
	for ctx.Err() == nil {
		busy, err := w.runAll(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.Error("evaluation", "err", err)
		}
		if busy && err == nil {
			continue
		}
		wait := w.Idle
		if err != nil {
			wait = min(wait, failedJobWait)
		}
		sleepUnlessWoken(ctx, w.wake, wait)
	}
}

// runAll runs one step of every running job; busy when any has more.
func (w *EvaluationWorker) runAll(ctx context.Context) (busy bool, err error) {
	ids, err := w.svc.RunningEvaluations(ctx, w.svc.now().Add(24*365*time.Hour), store.MaxLimit)
	if err != nil {
		return false, err
	}
	var first error
	for _, id := range ids {
		more, err := w.svc.RunEvaluation(ctx, id)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return false, err
			}
			first = errors.Join(first, err)
			continue
		}
		busy = busy || more
	}
	return busy, first
}
