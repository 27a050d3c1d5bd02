package evaluation

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/regrade"
	"github.com/agentclock/clockwork/internal/store"
)

// Evaluations re-grade stored executions against criteria given after the
// fact (package regrade). POST /v1/evaluations resolves the plans the
// filter names and stores the job: its record, and the plan list in
// chunks. The job then runs in steps (RunEvaluation), each grading a few
// plans and committing their results with the job's progress in one
// commit, so that a step that crashes is done again and a duplicate step
// does nothing: embedded by EvaluationWorker, on AWS from the grading
// queue (one message per step) in the grader function, with the sweep
// putting back a job whose message was lost. The plans' VERIFYs and
// evidence are never changed: each result is a signed record of its own.

// Evaluation states.
const (
	EvaluationRunning = "running"
	EvaluationDone    = "done"
	EvaluationFailed  = "failed"
)

// TypeEvaluation, TypeEvaluationRequest, TypeEvaluationPlans and
// TypeEvaluationResult are the job's items: its record (small: progress
// and tally), the request as sent, its plan list's chunks and one per
// result. TypeEvaluationOf marks, per agent it grades, that the job
// exists (erasing the agent's evidence erases the job).
const (
	TypeEvaluation        = "evaluation"
	TypeEvaluationRequest = "evalrequest"
	TypeEvaluationPlans   = "evalplans"
	TypeEvaluationResult  = "evalresult"
	TypeEvaluationOf      = "evalof"
)

// maxEvaluationRequestBytes bounds the stored request (DynamoDB's item
// limit is 400 KB).
const maxEvaluationRequestBytes = 350_000

// evaluationChunk is how many plans one chunk item of the list holds.
const evaluationChunk = 500

// runningEvaluationsPK is the GSI5 partition of the running evaluations,
// sorted by their last progress (so the sweep finds stalled ones).
const runningEvaluationsPK = "EVALRUN"

func evaluationPK(id string) string            { return "EVAL#" + esc(id) }
func evaluationKey(id string) store.Key        { return store.Key{PK: evaluationPK(id), SK: "EVAL"} }
func evaluationRequestKey(id string) store.Key { return store.Key{PK: evaluationPK(id), SK: "REQ"} }
func evaluationsOfPK(agent string) string      { return "EVA#" + esc(agent) }

// evaluationMarkKey is the mark of an evaluation that grades agent's
// plans, sorted by when it started.
func evaluationMarkKey(agent string, at time.Time, id string) store.Key {
	return store.Key{PK: evaluationsOfPK(agent), SK: sortTime(at) + "#" + esc(id)}
}

// evaluationMark is the data of a mark.
type evaluationMark struct {
	EvaluationID string `json:"evaluationId"`
}

func evaluationPlansKey(id string, chunk int) store.Key {
	return store.Key{PK: evaluationPK(id), SK: fmt.Sprintf("P#%05d", chunk)}
}
func evaluationResultKey(id string, seq int) store.Key {
	return store.Key{PK: evaluationPK(id), SK: fmt.Sprintf("R#%06d", seq)}
}

// PlanRef names one stored execution.
type PlanRef struct {
	AgentID string `json:"a"`
	PlanID  string `json:"p"`
}

// EvaluationRecord is a re-grading job.
type EvaluationRecord struct {
	EvaluationID string `json:"evaluationId"`
	// Owner is the principal that started it.
	Owner string `json:"owner"`
	// Agents are the agents whose plans it grades: reading it requires
	// acting for every one of them.
	Agents []string       `json:"agents"`
	Filter regrade.Filter `json:"filter"`
	State  string         `json:"state"`
	Total  int            `json:"total"`
	Done   int            `json:"done"`
	// Failures counts the steps that failed in a row (a step that
	// succeeds resets it); at maxStepFailures the job fails.
	Failures int `json:"failures,omitempty"`
	// JudgeCalls counts the model judge's calls made for it.
	JudgeCalls int           `json:"judgeCalls"`
	Tally      regrade.Tally `json:"tally"`
	CreatedAt  string        `json:"createdAt"`
	UpdatedAt  string        `json:"updatedAt"`
	FinishedAt string        `json:"finishedAt,omitempty"`
	Error      string        `json:"error,omitempty"`
	ExpiresAt  string        `json:"expiresAt,omitempty"`
}

func evaluationItem(r *EvaluationRecord) (store.Item, error) {
	var idx map[store.IndexName]store.IndexKey
	if r.State == EvaluationRunning {
		t, _ := expect.ParseTime(r.UpdatedAt)
		idx = map[store.IndexName]store.IndexKey{store.GSI5: {PK: runningEvaluationsPK, SK: sortTime(t) + "#" + esc(r.EvaluationID)}}
	}
	return expiring(mkItem(evaluationKey(r.EvaluationID), TypeEvaluation, r, idx))(r.ExpiresAt)
}

// Evaluator is the port of the queue that runs evaluations: Enqueue
// arranges for RunEvaluation to run for the job (again). Enqueuing twice
// is allowed; an error means it was not taken (the sweep repairs it).
type Evaluator interface {
	EnqueueEvaluation(ctx context.Context, evaluationID string) error
}

// SetEvaluator sets the queue evaluations are started on.
func (s *Service) SetEvaluator(e Evaluator) { s.evaluator = e }

// StartEvaluation validates req, resolves the plans its filter names and
// stores the job, then enqueues it. A principal that runs
// MaxRunningEvaluations already is TooManyRequests. The caller must be allowed to act for
// filter.agentId and for the agent of every plan named (Forbidden
// otherwise); a plan named that is not a completed execution the caller
// may read is Invalid naming filter.planIds[i] (the same answer whether it
// does not exist or is another tenant's); more than regrade.MaxPlans plans
// is Invalid naming filter. A job that matched no plan is stored done.
func (s *Service) StartEvaluation(ctx context.Context, req regrade.Request, principal string, c Caller) (*EvaluationRecord, error) {
	spec, err := regrade.Parse(req)
	if err != nil {
		return nil, err
	}
	if spec.JudgeModel != "" && s.judgeWithModel == nil && !s.modelGrading {
		return nil, errs.Fields("invalid evaluation", []errs.FieldError{{Path: "judge.model", Message: "cannot be honoured: no model judge is configured"}})
	}
	plans, agents, err := s.matchPlans(ctx, spec, c)
	if err != nil {
		return nil, err
	}
	if err := s.checkRunning(ctx, principal); err != nil {
		return nil, err
	}
	now := s.now()
	rec := &EvaluationRecord{EvaluationID: newEvaluationID(), Owner: principal, Filter: req.Filter, State: EvaluationRunning,
		Total: len(plans), CreatedAt: expect.FormatTime(now), UpdatedAt: expect.FormatTime(now), Agents: agents}
	if rec.Total == 0 {
		rec.State, rec.FinishedAt = EvaluationDone, rec.CreatedAt
	}
	if s.retain > 0 {
		rec.ExpiresAt = expect.FormatTime(now.Add(s.retain))
	}
	item, err := evaluationItem(rec)
	if err != nil {
		return nil, wrap(err)
	}
	reqItem, err := expiring(mkItem(evaluationRequestKey(rec.EvaluationID), TypeEvaluationRequest, req, nil))(rec.ExpiresAt)
	if err != nil {
		return nil, wrap(err)
	}
	if len(reqItem.Data) > maxEvaluationRequestBytes {
		return nil, errs.Fields("invalid evaluation", []errs.FieldError{{Path: "criteria",
			Message: fmt.Sprintf("make the request %d bytes, and at most %d can be stored: fewer or shorter criteria", len(reqItem.Data), maxEvaluationRequestBytes)}})
	}
	// First the marks by agent (an erasure finds the job by them; a mark
	// whose job was never stored only names an id), then the job.
	// Through store.Update, which tries a commit refused for a concurrent
	// transaction again (DynamoDB's TransactionConflict): the marks are
	// written blind (the same on every attempt), the job once (an attempt
	// whose answer was lost stored it).
	var marks []store.Item
	for _, a := range rec.Agents {
		data, _ := json.Marshal(evaluationMark{EvaluationID: rec.EvaluationID})
		it, err := expiring(store.Item{Key: evaluationMarkKey(a, now, rec.EvaluationID), Type: TypeEvaluationOf, Data: data}, nil)(rec.ExpiresAt)
		if err != nil {
			return nil, wrap(err)
		}
		marks = append(marks, it)
	}
	for len(marks) > 0 {
		batch := marks[:min(len(marks), store.MaxCommitWrites)]
		if err := store.Update(ctx, s.store, func(tx *store.Tx) error {
			for _, it := range batch {
				tx.PutUnconditional(it)
			}
			return nil
		}); err != nil {
			return nil, wrap(err)
		}
		marks = marks[len(batch):]
	}
	writes := []store.Write{store.PutIfAbsent(item), store.PutIfAbsent(reqItem)}
	for i := 0; i*evaluationChunk < len(plans); i++ {
		chunk := plans[i*evaluationChunk : min(len(plans), (i+1)*evaluationChunk)]
		it, err := expiring(mkItem(evaluationPlansKey(rec.EvaluationID, i), TypeEvaluationPlans, chunk, nil))(rec.ExpiresAt)
		if err != nil {
			return nil, wrap(err)
		}
		writes = append(writes, store.PutIfAbsent(it))
	}
	if err := store.Update(ctx, s.store, func(tx *store.Tx) error {
		if _, stored, err := tx.Get(ctx, item.Key); err != nil || stored {
			return err
		}
		for _, w := range writes {
			tx.Put(*w.Put)
		}
		return nil
	}); err != nil {
		return nil, wrap(err)
	}
	if rec.State == EvaluationRunning && s.evaluator != nil {
		if err := s.evaluator.EnqueueEvaluation(ctx, rec.EvaluationID); err != nil {
			// Stored: the sweep (or, embedded, the worker's own look at the
			// running jobs) starts it.
			return rec, nil
		}
	}
	return rec, nil
}

func newEvaluationID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "evl-" + hex.EncodeToString(b[:])
}

// matchPlans resolves the filter to the completed executions it names,
// and returns the agents it names (filter.agentId and the owners of the
// plans named), sorted: reading the job requires acting for each.
func (s *Service) matchPlans(ctx context.Context, spec regrade.Spec, c Caller) (plans []PlanRef, agents []string, err error) {
	f := spec.Filter
	if f.AgentID != "" && !c.May(f.AgentID) {
		return nil, nil, forbidden(f.AgentID)
	}
	agents = []string{}
	addAgent := func(a string) {
		if !slices.Contains(agents, a) {
			agents = append(agents, a)
		}
	}
	if f.AgentID != "" {
		addAgent(f.AgentID)
	}
	defer slices.Sort(agents)
	inWindow := func(ex *Execution) bool {
		if !ex.Completed {
			return false
		}
		if spec.From.IsZero() && spec.To.IsZero() {
			return true
		}
		t, err := expect.ParseTime(ex.CompletedAt)
		if err != nil {
			return false
		}
		return (spec.From.IsZero() || !t.Before(spec.From)) && (spec.To.IsZero() || t.Before(spec.To))
	}
	var out []PlanRef
	if len(f.PlanIDs) > 0 {
		var bad errs.Collector
		for i, id := range f.PlanIDs {
			ex, err := s.ExecutionFor(ctx, id, f.AgentID, c)
			switch {
			case errs.Is(err, errs.NotFound):
				bad.Add(fmt.Sprintf("filter.planIds[%d]", i), "names no execution this token may read")
				continue
			case errs.Is(err, errs.Forbidden):
				return nil, nil, err
			case err != nil:
				var e *errs.Error
				if errors.As(err, &e) && e.Code == errs.Invalid {
					bad.Add(fmt.Sprintf("filter.planIds[%d]", i), "is ambiguous: the plan is declared for several agents this token acts for; give filter.agentId")
					continue
				}
				return nil, nil, wrap(err)
			}
			addAgent(ex.Owner())
			if !ex.Completed {
				bad.Add(fmt.Sprintf("filter.planIds[%d]", i), "names a plan that has not completed (no PLAN_COMPLETE yet)")
				continue
			}
			if inWindow(ex) {
				out = append(out, PlanRef{AgentID: ex.Owner(), PlanID: ex.PlanID})
			}
		}
		if err := bad.Err("invalid evaluation"); err != nil {
			return nil, nil, err
		}
		return out, agents, nil
	}
	tooMany := errors.New("too many")
	err = eachOf(ctx, s.store, store.Query{Index: store.GSI2, PK: executionsOfPK(f.AgentID)}, func(it store.Item) error {
		if it.Type != TypeExecution {
			return nil
		}
		ex, err := decode[Execution](it)
		if err != nil {
			return err
		}
		if ex.Owner() != f.AgentID || !inWindow(ex) {
			return nil
		}
		if len(out) == regrade.MaxPlans {
			return tooMany
		}
		out = append(out, PlanRef{AgentID: f.AgentID, PlanID: ex.PlanID})
		return nil
	})
	if errors.Is(err, tooMany) {
		return nil, nil, errs.Fields("invalid evaluation", []errs.FieldError{{Path: "filter",
			Message: fmt.Sprintf("matches more than %d plans: narrow filter.from and filter.to, or split it into several evaluations", regrade.MaxPlans)}})
	}
	if err != nil {
		return nil, nil, wrap(err)
	}
	return out, agents, nil
}

// MaxEvaluationResultsPage bounds one page of an evaluation's results,
// and EvaluationResultsPageBytes its stored bytes past the first result.
const (
	MaxEvaluationResultsPage   = 100
	EvaluationResultsPageBytes = 1 << 20
)

// EvaluationView is GET /v1/evaluations/{id}: the job, its summary and one
// page of its results.
type EvaluationView struct {
	EvaluationID string             `json:"evaluationId"`
	State        string             `json:"state"`
	Progress     EvaluationProgress `json:"progress"`
	Filter       regrade.Filter     `json:"filter"`
	Results      []regrade.Result   `json:"results"`
	NextToken    string             `json:"nextToken,omitempty"`
	Summary      regrade.Summary    `json:"summary"`
	JudgeCalls   int                `json:"judgeCalls"`
	CreatedAt    string             `json:"createdAt"`
	FinishedAt   string             `json:"finishedAt,omitempty"`
	Error        string             `json:"error,omitempty"`
	StartedBy    string             `json:"startedBy"`
}

// EvaluationProgress counts the plans graded.
type EvaluationProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// Evaluation returns a job with one page of its results (limit 1 to
// MaxEvaluationResultsPage, 0 meaning it; results in the plan list's
// order; a page stops early past EvaluationResultsPageBytes). Errors: NotFound for an unknown id, and exactly the same when
// the caller may not act for every agent the job grades; Invalid naming
// limit or nextToken.
func (s *Service) Evaluation(ctx context.Context, id string, limit int, nextToken string, may Authorizer) (*EvaluationView, error) {
	rec, err := s.readEvaluation(ctx, id)
	if err != nil {
		return nil, err
	}
	if rec == nil || len(rec.Agents) == 0 || slices.ContainsFunc(rec.Agents, func(a string) bool { return !may(a) }) {
		return nil, errs.E(errs.NotFound, "no evaluation %q", id)
	}
	if limit < 0 || limit > MaxEvaluationResultsPage {
		return nil, errs.Fields("invalid listing", []errs.FieldError{{Path: "limit", Message: "must be between 1 and 100 (0 or none: 100)"}})
	}
	if limit == 0 {
		limit = MaxEvaluationResultsPage
	}
	q := store.Query{PK: evaluationPK(id), SKPrefix: "R#", Limit: limit, After: nextToken}
	p, err := s.store.Query(ctx, q)
	if errors.Is(err, store.ErrInvalid) {
		return nil, errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this service issued"}})
	}
	if err != nil {
		return nil, wrap(err)
	}
	// A page holds, past its first result, at most
	// EvaluationResultsPageBytes (an AWS Lambda answer is at most 6 MB):
	// read again up to the last result that fits, for that one's token.
	size, fit := 0, len(p.Items)
	for i, it := range p.Items {
		if size += len(it.Data); size > EvaluationResultsPageBytes && i > 0 {
			fit = i
			break
		}
	}
	if fit < len(p.Items) {
		q.Limit = fit
		if p, err = s.store.Query(ctx, q); err != nil {
			return nil, wrap(err)
		}
	}
	view := rec.View()
	v := &view
	v.NextToken = p.Next
	for _, it := range p.Items {
		r, err := decode[regrade.Result](it)
		if err != nil {
			return nil, wrap(err)
		}
		v.Results = append(v.Results, *r)
	}
	return v, nil
}

// readEvaluation reads a job, nil when there is none.
func (s *Service) readEvaluation(ctx context.Context, id string) (*EvaluationRecord, error) {
	it, err := s.store.Get(ctx, evaluationKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(err)
	}
	return decode[EvaluationRecord](it)
}

// RunningEvaluations returns the ids of the running jobs whose last
// progress is at or before upTo (limit at most store.MaxLimit).
func (s *Service) RunningEvaluations(ctx context.Context, upTo time.Time, limit int) ([]string, error) {
	p, err := s.store.Query(ctx, store.Query{Index: store.GSI5, PK: runningEvaluationsPK, SKUpTo: sortTime(upTo) + "#\uffff", Limit: min(limit, store.MaxLimit)})
	if err != nil {
		return nil, wrap(err)
	}
	var out []string
	for _, it := range p.Items {
		rec, err := decode[EvaluationRecord](it)
		if err != nil {
			return nil, wrap(err)
		}
		if rec.State == EvaluationRunning {
			out = append(out, rec.EvaluationID)
		}
	}
	return out, nil
}

// MaxEvaluationsPage bounds one page of an agent's evaluations.
const MaxEvaluationsPage = 100

// EvaluationsPage is one page of the evaluations of an agent's plans,
// newest first, each without its results.
type EvaluationsPage struct {
	Evaluations []EvaluationView `json:"evaluations"`
	NextToken   string           `json:"nextToken,omitempty"`
}

// EvaluationsOf returns one page of the evaluations that grade agentID's
// plans, newest first (limit 1 to MaxEvaluationsPage, 0 meaning 20), each
// with its progress and summary and no results. An evaluation that also
// grades agents the caller may not act for is left out (it may not read
// it). Errors: Forbidden when the caller may not act for agentID; Invalid
// naming limit or nextToken.
func (s *Service) EvaluationsOf(ctx context.Context, agentID string, limit int, nextToken string, may Authorizer) (EvaluationsPage, error) {
	if !may(agentID) {
		return EvaluationsPage{}, forbidden(agentID)
	}
	if limit < 0 || limit > MaxEvaluationsPage {
		return EvaluationsPage{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "limit", Message: "must be between 1 and 100 (0 or none: 20)"}})
	}
	if limit == 0 {
		limit = 20
	}
	p, err := s.store.Query(ctx, store.Query{PK: evaluationsOfPK(agentID), Limit: limit, Descending: true, After: nextToken})
	if errors.Is(err, store.ErrInvalid) {
		return EvaluationsPage{}, errs.Fields("invalid listing", []errs.FieldError{{Path: "nextToken", Message: "is not a token this service issued"}})
	}
	if err != nil {
		return EvaluationsPage{}, wrap(err)
	}
	out := EvaluationsPage{Evaluations: []EvaluationView{}, NextToken: p.Next}
	for _, it := range p.Items {
		var m evaluationMark
		if err := json.Unmarshal(it.Data, &m); err != nil {
			return EvaluationsPage{}, wrap(err)
		}
		rec, err := s.readEvaluation(ctx, m.EvaluationID)
		if err != nil {
			return EvaluationsPage{}, err
		}
		if rec == nil || slices.ContainsFunc(rec.Agents, func(a string) bool { return !may(a) }) {
			continue // not stored (a mark of a job that failed to start), or not the caller's to read
		}
		out.Evaluations = append(out.Evaluations, rec.View())
	}
	return out, nil
}

// View is the record as the API shows it, without results.
func (rec *EvaluationRecord) View() EvaluationView {
	return EvaluationView{EvaluationID: rec.EvaluationID, State: rec.State, Progress: EvaluationProgress{Done: rec.Done, Total: rec.Total},
		Filter: rec.Filter, Results: []regrade.Result{}, Summary: rec.Tally.Summary(), JudgeCalls: rec.JudgeCalls,
		CreatedAt: rec.CreatedAt, FinishedAt: rec.FinishedAt, Error: rec.Error, StartedBy: rec.Owner}
}

// MaxRunningEvaluations bounds the evaluations one principal runs at once:
// they share the grader and the judge's rate with everyone's.
const MaxRunningEvaluations = 5

// checkRunning refuses a principal that already runs
// MaxRunningEvaluations (TooManyRequests). It reads the running index,
// which on DynamoDB may show a job a moment late.
func (s *Service) checkRunning(ctx context.Context, principal string) error {
	p, err := s.store.Query(ctx, store.Query{Index: store.GSI5, PK: runningEvaluationsPK, Limit: 200})
	if err != nil {
		return wrap(err)
	}
	n := 0
	for _, it := range p.Items {
		rec, err := decode[EvaluationRecord](it)
		if err != nil {
			return wrap(err)
		}
		if rec.State == EvaluationRunning && rec.Owner == principal {
			n++
		}
	}
	if n >= MaxRunningEvaluations {
		return errs.E(errs.TooManyRequests, "%s runs %d evaluations already, the most one principal may run at once: wait for one to end", principal, n)
	}
	return nil
}
