package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sync"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/regrade"
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
