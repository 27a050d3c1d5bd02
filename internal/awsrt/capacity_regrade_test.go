package awsrt

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/otlpin"
	"github.com/agentclock/clockwork/internal/store/dynamo"
)

// TestWriteUnitsPerRegrade measures, on the emulator's capacity rules (see
// TestWriteUnitsPerExpectation), what re-grading stored executions costs
// DynamoDB: 50 plans traced as TestWriteUnitsPerSpan's, then an evaluation
// of them with three DETERMINISTIC criteria, started through the API and
// run step by step as the grader function runs it. It prints the write
// units and read calls per plan and the cost of re-grading 10,000 plans at
// on-demand list prices (docs/evaluation.md, "Re-grading stored
// executions"), and fails past 12 write units per plan.
func TestWriteUnitsPerRegrade(t *testing.T) {
	ctx := context.Background()
	capacity := &dynamo.Capacity{}
	counter := &dynamo.Counter{}
	rt := newRuntimeWithTokens(t, time.Now, `{"tokens":[{"token":"t","principal":"p","scopes":["anticipations:write","events:write","grades:write","read"],"agents":["*"]}]}`,
		counter, dynamo.CapacityMiddleware(capacity))
	drain := streamDrainer(t, rt, 50)
	post := poster(t)
	const plans = 50
	agent, body, _ := tracedPlans(t, post, rt, plans)
	traces := rt.Traces()
	otlpin.Mount(traces, otlpin.Config{})
	post(traces, "/v1/traces", "application/x-protobuf", body)
	drain()
	capacity.Reset()
	counter.Reset()

	req, _ := json.Marshal(map[string]any{"filter": map[string]any{"agentId": agent}, "criteria": []any{
		map[string]any{"criterion_id": "booked", "description": "booked a flight", "measurement": "DETERMINISTIC", "assertion": "tool_invoked('book_flight')", "weight": 1},
		map[string]any{"criterion_id": "in-order", "description": "searched before booking", "measurement": "DETERMINISTIC",
			"assertion": "trajectory_in_order(['search_flights', 'book_flight'])", "weight": 1, "category": "trajectory"},
		map[string]any{"criterion_id": "no-escalation", "description": "never escalated", "measurement": "DETERMINISTIC", "assertion": "escalation_count == 0", "weight": 1, "category": "anti"},
	}, "gradingPolicy": map[string]any{"grader_type": "CODE", "passing_threshold": 0.8, "weighted_scoring": true, "fail_on_any_anti_criteria": true}})
	post(rt.HTTP(), "/v1/evaluations", "application/json", req)
	start, startCalls := capacity.WriteUnits(), counter.Snapshot()
	ids, err := rt.Eval.RunningEvaluations(ctx, time.Now().Add(time.Hour), 10)
	if err != nil || len(ids) != 1 {
		t.Fatalf("running evaluations: %v %v", ids, err)
	}
	capacity.Reset()
	counter.Reset()
	began := time.Now()
	steps := 0
	for more := true; more; steps++ {
		if more, err = rt.Eval.RunEvaluation(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(began)
	run, runCalls := capacity.WriteUnits(), counter.Snapshot()
	v, err := rt.Eval.Evaluation(ctx, ids[0], 0, "", func(string) bool { return true })
	if err != nil || v.State != evaluation.EvaluationDone || v.Summary.Graded != plans || *v.Summary.PassRate != 1 {
		t.Fatalf("evaluation: %+v %v", v, err)
	}
	reads := func(c map[string]int) int { return c["GetItem"] + c["Query"] + c["BatchGetItem"] }
	perPlan := (start + run) / plans
	readsPerPlan := float64(reads(startCalls)+reads(runCalls)) / plans
	t.Logf("%d plans in %d steps (%s on the emulator): start %.0f write units %v; steps %.0f write units %v", plans, steps, took.Round(time.Millisecond), start, startCalls, run, runCalls)
	t.Logf("per plan: %.1f write units, %.1f read calls; re-grading 10,000 plans: $%.3f of writes and at most $%.3f of reads",
		perPlan, readsPerPlan, perPlan*1e4*0.625/1e6, readsPerPlan*1e4*0.125/1e6)
	if perPlan > 12 {
		t.Errorf("%.1f write units per plan, over 12", perPlan)
	}
}
