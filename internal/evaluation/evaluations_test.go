package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/regrade"
	"github.com/agentclock/clockwork/internal/store"
)

// declarePlan declares an ANTICIPATE for plan with the given expectations
// and policy (nil: the seed's), runs the plan with steps STEP_COMPLETEs
// and one TOOL_REQUEST of tool, completes it and VERIFYs it. It returns
// the agent.
func declarePlan(t *testing.T, svc *Service, plan string, steps int, tool string, expectations, policy map[string]any) string {
	t.Helper()
	raw, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["plan_id"] = plan
	m["anticipation_id"] = "ant-" + plan
	if expectations != nil {
		m["expectations"] = expectations
	}
	if policy != nil {
		m["grading_policy"] = policy
	}
	b, _ := json.Marshal(m)
	ant, err := anticipate.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	all := func(string) bool { return true }
	ctx := context.Background()
	if _, _, err := svc.Declare(ctx, ant, "test", all); err != nil {
		t.Fatal(err)
	}
	id := 0
	next := func(typ string, fields map[string]any) {
		t.Helper()
		if _, err := svc.AppendEvent(ctx, plan, event(id, typ, fields), Caller{May: all}); err != nil {
			t.Fatal(err)
		}
		id++
	}
	next("TOOL_REQUEST", map[string]any{"tool": tool, "arguments": map[string]any{}})
	for range steps {
		next("STEP_COMPLETE", nil)
	}
	next("PLAN_COMPLETE", nil)
	agent, _ := m["agent_id"].(string)
	if err := svc.Verify(ctx, agent, plan); err != nil {
		t.Fatal(err)
	}
	return agent
}

// rubricB is the changed rubric the evaluation grades with, as the
// request's flat criteria and as an ANTICIPATE's expectations.
var rubricB = []map[string]any{
	{"criterion_id": "few-steps", "description": "at most two steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 2", "weight": 0.6},
	{"criterion_id": "judged", "description": "the work reads well", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.4, "category": "trajectory"},
	{"criterion_id": "no-delete", "description": "never deletes", "measurement": "DETERMINISTIC", "assertion": "tool_invoked('iam_delete_user') == false", "weight": 1, "category": "anti"},
}

var policyB = map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.7, "weighted_scoring": true, "fail_on_any_anti_criteria": true}

func rubricBExpectations() map[string]any {
	ex := map[string]any{"outcome_criteria": []any{}, "trajectory_criteria": []any{}, "anti_criteria": []any{}}
	for _, c := range rubricB {
		cc := map[string]any{}
		for k, v := range c {
			if k != "category" {
				cc[k] = v
			}
		}
		cat, _ := c["category"].(string)
		if cat == "" {
			cat = "outcome"
		}
		ex[cat+"_criteria"] = append(ex[cat+"_criteria"].([]any), cc)
	}
	return ex
}

func rawCriteria(t *testing.T, list []map[string]any) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for _, c := range list {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func runEvaluation(t *testing.T, svc *Service, id string) {
	t.Helper()
	for range 1000 {
		more, err := svc.RunEvaluation(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return
		}
	}
	t.Fatal("the evaluation never finished")
}

// TestEvaluationEqualsFreshGrading: re-grading stored plans with a changed
// rubric gives, plan by plan, what a fresh VERIFY of the same events
// against that rubric gives (criteria, score, verdict), leaves the plans'
// own VERIFYs as they were, reports the originals and the changes, and a
// step run twice at once commits its plans once.
func TestEvaluationEqualsFreshGrading(t *testing.T) {
	judge := &scriptedJudge{}
	svc, q, _ := gradingService(t, judge, JudgeRetry{})
	ctx := context.Background()
	all := func(string) bool { return true }
	const n = 60
	var agent string
	tools := []string{"iam_create_user", "iam_delete_user"}
	for i := range n {
		agent = declarePlan(t, svc, fmt.Sprintf("old-%03d", i), i%4, tools[i%5/4], nil, nil)
		declarePlan(t, svc, fmt.Sprintf("new-%03d", i), i%4, tools[i%5/4], rubricBExpectations(), policyB)
	}
	// The fresh VERIFYs' HEURISTIC criteria are graded by their jobs.
	for _, j := range q.take() {
		if _, err := svc.GradeCriterion(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	judge.calls.Store(0)
	before := map[string]anticipate.Verification{}
	for i := range n {
		vs, err := svc.Verifications(ctx, fmt.Sprintf("ant-old-%03d", i), agent, Caller{May: all})
		if err != nil || len(vs) != 1 {
			t.Fatalf("original VERIFY of old-%03d: %v %v", i, vs, err)
		}
		before[vs[0].PlanID] = vs[0]
	}
	var planIDs []string
	for i := range n {
		planIDs = append(planIDs, fmt.Sprintf("old-%03d", i))
	}
	policy, _ := json.Marshal(policyB)
	rec, err := svc.StartEvaluation(ctx, regrade.Request{Filter: regrade.Filter{AgentID: agent, PlanIDs: planIDs},
		Criteria: rawCriteria(t, rubricB), GradingPolicy: policy}, "tester", Caller{May: all})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != EvaluationRunning || rec.Total != n {
		t.Fatalf("started %+v", rec)
	}
	// Two steps at once: one commits, the other finds its plans done.
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := svc.RunEvaluation(ctx, rec.EvaluationID); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	runEvaluation(t, svc, rec.EvaluationID)
	var results []regrade.Result
	token := ""
	for {
		v, err := svc.Evaluation(ctx, rec.EvaluationID, 7, token, all)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != EvaluationDone || v.Progress.Done != n {
			t.Fatalf("state %s progress %+v", v.State, v.Progress)
		}
		results = append(results, v.Results...)
		if token = v.NextToken; token == "" {
			break
		}
	}
	if len(results) != n {
		t.Fatalf("%d results, want %d", len(results), n)
	}
	changed, mismatched, judged := 0, 0, 0
	for i, r := range results {
		if r.PlanID != fmt.Sprintf("old-%03d", i) || r.Error != "" {
			t.Fatalf("result %d: %+v", i, r)
		}
		fresh, err := svc.Verifications(ctx, fmt.Sprintf("ant-new-%03d", i), agent, Caller{May: all})
		if err != nil || len(fresh) != 1 {
			t.Fatal(err)
		}
		f := fresh[0]
		if r.Verdict != f.Verdict || *r.Score != f.Score || !reflect.DeepEqual(r.Criteria, f.Results) {
			if mismatched++; mismatched > 2 {
				continue
			}
			t.Errorf("plan %s: re-graded %s %v %+v, graded fresh %s %v %+v", r.PlanID, r.Verdict, *r.Score, r.Criteria, f.Verdict, f.Score, f.Results)
		}
		orig := before[r.PlanID]
		if r.OriginalVerdict != orig.Verdict || *r.OriginalScore != orig.Score || r.OriginalVerificationID != orig.VerificationID {
			t.Errorf("plan %s: original %s %v %s, stored %s %v %s", r.PlanID, r.OriginalVerdict, *r.OriginalScore, r.OriginalVerificationID, orig.Verdict, orig.Score, orig.VerificationID)
		}
		if r.Verification == nil || r.Verification.VerificationID != regrade.ResultID(rec.EvaluationID, agent, r.PlanID) || r.Verification.AnticipationID != rec.EvaluationID {
			t.Errorf("plan %s: signed record %+v", r.PlanID, r.Verification)
		} else if err := anticipate.CheckSeal(r.Verification); err != nil {
			t.Errorf("plan %s: the result's seal: %v", r.PlanID, err)
		}
		if r.Changed() {
			changed++
		}
		if r.Verdict != anticipate.VerdictFail || len(r.Verification.AntiCriteriaFailed) == 0 {
			judged++ // a failed anti criterion makes the verdict final: no judge call
		}
	}
	v, _ := svc.Evaluation(ctx, rec.EvaluationID, 1, "", all)
	if v.Summary.ChangedCount != changed || changed == 0 || len(v.Summary.Changed) != changed {
		t.Errorf("summary changed %d %v, counted %d", v.Summary.ChangedCount, v.Summary.Changed, changed)
	}
	if v.Summary.Graded != n || v.Summary.PassRate == nil || len(v.Summary.PerCriterion) != 3 {
		t.Errorf("summary %+v", v.Summary)
	}
	if mismatched > 0 {
		t.Errorf("%d of %d plans re-graded otherwise than graded fresh", mismatched, n)
	}
	if v.JudgeCalls != judged || judge.calls.Load() != int64(judged) || judged == n {
		t.Errorf("%d judge calls recorded, %d made, want %d (one per plan whose verdict was not final first)", v.JudgeCalls, judge.calls.Load(), judged)
	}
	for i := range n {
		vs, _ := svc.Verifications(ctx, fmt.Sprintf("ant-old-%03d", i), agent, Caller{May: all})
		if !reflect.DeepEqual(vs[0], before[vs[0].PlanID]) {
			t.Fatalf("the original VERIFY of %s changed", vs[0].PlanID)
		}
	}
	// By agent and window: every completed plan of the agent.
	rec2, err := svc.StartEvaluation(ctx, regrade.Request{Filter: regrade.Filter{AgentID: agent}, Criteria: rawCriteria(t, rubricB[:1])}, "tester", Caller{May: all})
	if err != nil {
		t.Fatal(err)
	}
	if rec2.Total != 2*n {
		t.Errorf("the agent's filter matched %d plans, want %d", rec2.Total, 2*n)
	}
	runEvaluation(t, svc, rec2.EvaluationID)
	v2, _ := svc.Evaluation(ctx, rec2.EvaluationID, 0, "", all)
	if v2.Summary.Graded != 2*n || v2.Summary.Errors != 0 {
		t.Errorf("with each plan's own policy: %+v", v2.Summary)
	}
}

// TestEvaluationTenancy: another tenant can neither start an evaluation
// over an agent's plans nor read one, and a plan it cannot read is
// refused as if it did not exist.
func TestEvaluationTenancy(t *testing.T) {
	svc, _, _ := gradingService(t, &scriptedJudge{}, JudgeRetry{})
	ctx := context.Background()
	agent := declarePlan(t, svc, "p-1", 1, "iam_create_user", nil, nil)
	all := func(string) bool { return true }
	other := func(a string) bool { return a == "someone-else" }
	req := regrade.Request{Filter: regrade.Filter{AgentID: agent}, Criteria: rawCriteria(t, rubricB[:1])}
	if _, err := svc.StartEvaluation(ctx, req, "mallory", Caller{May: other}); !errs.Is(err, errs.Forbidden) {
		t.Errorf("another tenant started an evaluation of %s: %v", agent, err)
	}
	_, err := svc.StartEvaluation(ctx, regrade.Request{Filter: regrade.Filter{PlanIDs: []string{"p-1"}}, Criteria: rawCriteria(t, rubricB[:1])}, "mallory", Caller{May: other, Only: "someone-else"})
	if fe := fieldsOf(err); len(fe) != 1 || fe[0].Path != "filter.planIds[0]" {
		t.Errorf("another tenant naming the plan: %v", err)
	}
	rec, err := svc.StartEvaluation(ctx, req, "owner", Caller{May: all})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Evaluation(ctx, rec.EvaluationID, 0, "", other); !errs.Is(err, errs.NotFound) {
		t.Errorf("another tenant read the evaluation: %v", err)
	}
	if _, err := svc.Evaluation(ctx, "evl-nope", 0, "", all); !errs.Is(err, errs.NotFound) {
		t.Errorf("unknown evaluation: %v", err)
	}
}

func fieldsOf(err error) []errs.FieldError {
	if e, ok := err.(*errs.Error); ok {
		return e.Fields
	}
	return nil
}

// hangingJudge holds every call until its context ends.
type hangingJudge struct{ calls atomic.Int64 }

func (j *hangingJudge) Judge(ctx context.Context, _ anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	j.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// heuristicCriteria returns n HEURISTIC criteria h-0 … (and one
// DETERMINISTIC), as an evaluation takes them.
func heuristicCriteria(t *testing.T, n int) []json.RawMessage {
	list := []map[string]any{{"criterion_id": "steps", "description": "few steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 5", "weight": 1}}
	for i := range n {
		list = append(list, map[string]any{"criterion_id": fmt.Sprintf("h-%d", i), "description": "reads well", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 1})
	}
	return rawCriteria(t, list)
}

var composite, _ = json.Marshal(map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": true})

// TestEvaluationStepCommitsWhenTheJudgeHangs: a judge that hangs cannot
// hold a step past its time (on AWS, past the grader function's timeout,
// which would fail the whole batch and repeat the step forever): the
// calls are cut at the step's deadline, the plans commit with those
// criteria PENDING saying so, and the job goes on.
func TestEvaluationStepCommitsWhenTheJudgeHangs(t *testing.T) {
	judge := &hangingJudge{}
	svc, _, _ := gradingService(t, judge, JudgeRetry{CallTimeout: time.Hour})
	all := func(string) bool { return true }
	agent := declarePlan(t, svc, "p-1", 1, "iam_create_user", nil, nil)
	declarePlan(t, svc, "p-2", 1, "iam_create_user", nil, nil)
	rec, err := svc.StartEvaluation(context.Background(), regrade.Request{Filter: regrade.Filter{AgentID: agent}, Criteria: heuristicCriteria(t, 3), GradingPolicy: composite}, "t", Caller{May: all})
	if err != nil {
		t.Fatal(err)
	}
	// The deadline a Lambda invocation would give: the step keeps a margin
	// before it to commit.
	ctx, cancel := context.WithTimeout(context.Background(), evaluationStepMargin+2*time.Second)
	defer cancel()
	more, err := svc.RunEvaluation(ctx, rec.EvaluationID)
	if err != nil || more || ctx.Err() != nil {
		t.Fatalf("the step: more %v, err %v, its caller's deadline passed: %v", more, err, ctx.Err())
	}
	v, _ := svc.Evaluation(context.Background(), rec.EvaluationID, 0, "", all)
	if v.State != EvaluationDone || len(v.Results) != 2 || judge.calls.Load() != 6 {
		t.Fatalf("%s, %d results, %d judge calls", v.State, len(v.Results), judge.calls.Load())
	}
	for _, r := range v.Results {
		for _, c := range r.Criteria[1:] {
			if c.Status != anticipate.StatusPending || !strings.Contains(c.Evidence, "not graded within the step's time") {
				t.Errorf("%s %s: %+v", r.PlanID, c.CriterionID, c)
			}
		}
	}
}

// failingResults refuses every commit that stores a result.
type failingResults struct{ store.Store }

func (s failingResults) Commit(ctx context.Context, ws []store.Write) error {
	for _, w := range ws {
		if w.Put != nil && w.Put.Type == TypeEvaluationResult {
			return errors.New("the store refuses results")
		}
	}
	return s.Store.Commit(ctx, ws)
}

// TestEvaluationFailsAfterStepsFailInARow: a step that can never commit
// fails the job after maxStepFailures attempts, rather than coming back
// (with its judge calls) for ever.
func TestEvaluationFailsAfterStepsFailInARow(t *testing.T) {
	svc, _, _ := gradingService(t, &scriptedJudge{}, JudgeRetry{})
	all := func(string) bool { return true }
	agent := declarePlan(t, svc, "p-1", 1, "iam_create_user", nil, nil)
	ctx := context.Background()
	rec, err := svc.StartEvaluation(ctx, regrade.Request{Filter: regrade.Filter{AgentID: agent}, Criteria: heuristicCriteria(t, 0), GradingPolicy: composite}, "t", Caller{May: all})
	if err != nil {
		t.Fatal(err)
	}
	broken := New(failingResults{svc.store}, Options{})
	for i := range maxStepFailures {
		if _, err := broken.RunEvaluation(ctx, rec.EvaluationID); err == nil {
			t.Fatalf("step %d succeeded", i)
		}
	}
	v, _ := svc.Evaluation(ctx, rec.EvaluationID, 0, "", all)
	if v.State != EvaluationFailed || !strings.Contains(v.Error, "failed 5 times in a row") {
		t.Fatalf("after %d failed steps: %s %q", maxStepFailures, v.State, v.Error)
	}
	if more, err := svc.RunEvaluation(ctx, rec.EvaluationID); more || err != nil {
		t.Fatalf("a failed job ran again: %v %v", more, err)
	}
}

// TestEvaluationResultsAtTheirLimits: a result too large for an item is
// stored without its signed record (saying so), or as not graded; the
// summary counts what is stored; a page stops at its byte bound; and
// erasing the agent's evidence erases the evaluation.
func TestEvaluationResultsAtTheirLimits(t *testing.T) {
	svc, _, _ := gradingService(t, answerJudge{rationale: strings.Repeat("r", anticipate.MaxRationaleLen)}, JudgeRetry{})
	all := func(string) bool { return true }
	ctx := context.Background()
	var agent string
	for i := range 8 {
		agent = declarePlan(t, svc, fmt.Sprintf("p-%d", i), 1, "iam_create_user", nil, nil)
	}
	// 25 judged criteria: the criteria fit, the signed record beside them not.
	rec, err := svc.StartEvaluation(ctx, regrade.Request{Filter: regrade.Filter{AgentID: agent}, Criteria: heuristicCriteria(t, 25), GradingPolicy: composite}, "t", Caller{May: all})
	if err != nil {
		t.Fatal(err)
	}
	runEvaluation(t, svc, rec.EvaluationID)
	v, err := svc.Evaluation(ctx, rec.EvaluationID, 0, "", all)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Results) == 8 || v.NextToken == "" || len(v.Results) < 1 {
		t.Errorf("a page of results of about 210 KB each: %d results, next %q", len(v.Results), v.NextToken)
	}
	for _, r := range v.Results {
		if r.Verification != nil || !strings.HasPrefix(r.Omitted, "verification: ") || r.Verdict != anticipate.VerdictPass {
			t.Errorf("%s: verification %v, omitted %q, verdict %s", r.PlanID, r.Verification != nil, r.Omitted, r.Verdict)
		}
	}
	// 50: not even the criteria fit.
	rec, err = svc.StartEvaluation(ctx, regrade.Request{Filter: regrade.Filter{PlanIDs: []string{"p-0"}}, Criteria: heuristicCriteria(t, 50), GradingPolicy: composite}, "t", Caller{May: all, Only: agent})
	if err != nil {
		t.Fatal(err)
	}
	runEvaluation(t, svc, rec.EvaluationID)
	v, _ = svc.Evaluation(ctx, rec.EvaluationID, 0, "", all)
	if len(v.Results) != 1 || !strings.Contains(v.Results[0].Error, "over the 307200 a result may take") || v.Summary.Errors != 1 || v.Summary.Graded != 0 {
		t.Errorf("a result too large to store: %+v, summary %+v", v.Results, v.Summary)
	}
	out, err := svc.EraseAgent(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Evaluation(ctx, rec.EvaluationID, 0, "", all); !errs.Is(err, errs.NotFound) || out[TypeEvaluationResult] != 9 || out[TypeEvaluation] != 2 {
		t.Errorf("after the erasure (%v): %v", out, err)
	}
}

// TestEvaluationsOfAnAgent: an agent's evaluations are listed newest
// first, without a job that also grades an agent the caller may not act
// for; a principal runs at most MaxRunningEvaluations at once.
func TestEvaluationsOfAnAgent(t *testing.T) {
	svc, _, clock := gradingService(t, &scriptedJudge{}, JudgeRetry{})
	ctx := context.Background()
	all := func(string) bool { return true }
	agent := declarePlan(t, svc, "p-1", 1, "iam_create_user", nil, nil)
	req := regrade.Request{Filter: regrade.Filter{AgentID: agent}, Criteria: heuristicCriteria(t, 0), GradingPolicy: composite}
	var ids []string
	for range MaxRunningEvaluations {
		rec, err := svc.StartEvaluation(ctx, req, "busy", Caller{May: all})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.EvaluationID)
		clock.Add(time.Second)
	}
	if _, err := svc.StartEvaluation(ctx, req, "busy", Caller{May: all}); !errs.Is(err, errs.TooManyRequests) {
		t.Fatalf("a sixth running evaluation of one principal: %v", err)
	}
	if _, err := svc.StartEvaluation(ctx, req, "someone", Caller{May: all}); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	runEvaluation(t, svc, ids[0])
	if _, err := svc.StartEvaluation(ctx, req, "busy", Caller{May: all}); err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	page, err := svc.EvaluationsOf(ctx, agent, 3, "", all)
	if err != nil || len(page.Evaluations) != 3 || page.NextToken == "" || page.Evaluations[0].CreatedAt < page.Evaluations[2].CreatedAt {
		t.Fatalf("first page: %+v %v", page, err)
	}
	// A job that also grades another agent's plan is not listed for a
	// caller that acts for this agent alone.
	other := "agent-other"
	declareFor := func() {
		raw, _ := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		m["agent_id"], m["plan_id"], m["anticipation_id"] = other, "p-o", "ant-o"
		b, _ := json.Marshal(m)
		ant, _ := anticipate.Sign(b)
		if _, _, err := svc.Declare(ctx, ant, "test", all); err != nil {
			t.Fatal(err)
		}
		for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
			if _, err := svc.AppendEvent(ctx, "p-o", event(i, typ, map[string]any{"agent_id": other}), Caller{May: all}); err != nil {
				t.Fatal(err)
			}
		}
	}
	declareFor()
	both, err := svc.StartEvaluation(ctx, regrade.Request{Filter: regrade.Filter{PlanIDs: []string{"p-1", "p-o"}}, Criteria: heuristicCriteria(t, 0), GradingPolicy: composite}, "someone", Caller{May: all})
	if err != nil {
		t.Fatal(err)
	}
	only := func(a string) bool { return a == agent }
	for token := ""; ; {
		page, err := svc.EvaluationsOf(ctx, agent, 100, token, only)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Evaluations {
			if v.EvaluationID == both.EvaluationID {
				t.Fatal("a job of another agent's plans too was listed")
			}
		}
		if token = page.NextToken; token == "" {
			break
		}
	}
	if page, _ := svc.EvaluationsOf(ctx, other, 0, "", all); len(page.Evaluations) != 1 || page.Evaluations[0].EvaluationID != both.EvaluationID {
		t.Fatalf("the other agent's: %+v", page)
	}
	if _, err := svc.EvaluationsOf(ctx, agent, 0, "", func(string) bool { return false }); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("another tenant listing: %v", err)
	}
}
