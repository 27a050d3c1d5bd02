package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
)

// runUnbound sends a plan of agent that no ANTICIPATE binds to
// PLAN_COMPLETE (the events name the agent) and VERIFYs it; the error is
// the first event's refusal.
func runUnbound(t *testing.T, svc *Service, agent, plan string) error {
	t.Helper()
	ctx := context.Background()
	all := func(string) bool { return true }
	for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
		if _, err := svc.AppendEvent(ctx, plan, event(i, typ, map[string]any{"agent_id": agent}), Caller{May: all}); err != nil {
			return err
		}
	}
	if err := svc.Verify(ctx, agent, plan); err != nil {
		t.Fatal(err)
	}
	return nil
}

// TestOnlineEvaluators: a plan no ANTICIPATE binds is refused until its
// agent has an evaluator; then every matching plan in the sample gets a
// VERIFY marked sampled, naming the evaluator, with no anticipation
// digest, graded against the stand-in ANTICIPATE kept with it (the judge
// grades its HEURISTIC criterion from that, after the evaluator changed);
// a replay makes no second VERIFY; the evaluator lists its VERIFYs; the
// bundle holds the stand-in; erasing the agent erases both.
func TestOnlineEvaluators(t *testing.T) {
	j := &scriptedJudge{}
	svc, jobs, clock := gradingService(t, j, JudgeRetry{})
	ctx := context.Background()
	const agent = "agent-online"
	if err := runUnbound(t, svc, agent, "p-refused"); !errs.Is(err, errs.NotFound) || !strings.Contains(err.Error(), "evaluator") {
		t.Fatalf("a plan with no ANTICIPATE and no evaluator: %v", err)
	}
	body := `{"criteria":[{"criterion_id":"few","description":"few steps","measurement":"DETERMINISTIC","assertion":"step_count <= 5","weight":1},
		{"criterion_id":"tone","description":"polite","measurement":"HEURISTIC","assertion":"The summary is professional","weight":1,"category":"trajectory"}],
		"sample":1,"filter":{"planIdPrefix":"support-"}}`
	if _, created, err := svc.PutEvaluator(ctx, agent, "support-tone", []byte(body)); err != nil || !created {
		t.Fatalf("put evaluator: %v %v", created, err)
	}
	if _, _, err := svc.PutEvaluator(ctx, agent, "never", []byte(`{"criteria":[{"criterion_id":"few","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <= 5","weight":1}],"sample":0.000001}`)); err != nil {
		t.Fatal(err)
	}
	if err := runUnbound(t, svc, agent, "support-1"); err != nil {
		t.Fatal(err)
	}
	if err := runUnbound(t, svc, agent, "billing-1"); err != nil {
		t.Fatal(err)
	}
	vid := anticipate.SampledVerificationIDFor(agent, "support-tone", "support-1")
	vr, err := svc.Verification(ctx, vid, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	v := vr.Verification
	if !v.Sampled || v.Evaluator != "support-tone" || v.AnticipationDigest != "" || v.AnticipationID != "evaluator:support-tone" || v.Verdict != anticipate.VerdictPending {
		t.Fatalf("sampled VERIFY %+v", v)
	}
	if err := anticipate.CheckSeal(&v); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Verification(ctx, anticipate.SampledVerificationIDFor(agent, "support-tone", "billing-1"), func(string) bool { return true }); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a plan outside the filter was graded: %v", err)
	}
	// The evaluator changes; the judge still grades the criteria the
	// VERIFY was made with.
	if _, _, err := svc.PutEvaluator(ctx, agent, "support-tone", []byte(`{"criteria":[{"criterion_id":"other","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <= 5","weight":1}],"sample":1}`)); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Second)
	for _, job := range jobs.take() {
		if _, err := svc.GradeCriterion(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	vr, _ = svc.Verification(ctx, vid, func(string) bool { return true })
	if r := resultOf(vr.Verification, "tone"); r.Status != anticipate.StatusPass || r.GradedBy != "model:test" || vr.Verification.Verdict != anticipate.VerdictPass {
		t.Fatalf("judged %+v, verdict %s", r, vr.Verification.Verdict)
	}
	if !vr.Verification.Sampled || vr.Verification.AnticipationDigest != "" {
		t.Fatalf("grading dropped the sampled mark: %+v", vr.Verification)
	}
	// A replayed completion makes no second VERIFY.
	if err := svc.Verify(ctx, agent, "support-1"); err != nil {
		t.Fatal(err)
	}
	page, err := svc.EvaluatorVerifications(ctx, agent, "support-tone", 0, "")
	if err != nil || len(page.Verifications) != 1 {
		t.Fatalf("the evaluator's VERIFYs: %+v %v", page, err)
	}
	parts, err := svc.Bundle(ctx, vid, func(string) bool { return true })
	if err != nil || !strings.Contains(string(parts.Anticipation), `"emitter":"external_evaluator"`) || !strings.Contains(string(parts.Verification), `"sampled":true`) {
		t.Fatalf("bundle %v %+v", err, parts)
	}
	// A plan taken without an ANTICIPATE cannot get one later: it could
	// name an outcome already seen.
	all := func(string) bool { return true }
	if _, err := svc.AppendEvent(ctx, "support-late", event(0, "OUTCOME", map[string]any{"agent_id": agent}), Caller{May: all}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var late map[string]any
	_ = json.Unmarshal(raw, &late)
	late["agent_id"], late["plan_id"], late["anticipation_id"] = agent, "support-late", "ant-late"
	lateRaw, _ := json.Marshal(late)
	if _, _, err := svc.Declare(ctx, signed(t, lateRaw), "test", all); !errs.Is(err, errs.Conflict) {
		t.Fatalf("an ANTICIPATE for a plan taken without one: %v", err)
	}
	// A plan no evaluator's filter takes is refused.
	if err := svc.DeleteEvaluator(ctx, agent, "never"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutEvaluator(ctx, agent, "support-tone", []byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := runUnbound(t, svc, agent, "billing-2"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a plan no evaluator takes: %v", err)
	}
	out, err := svc.EraseAgent(ctx, agent)
	if err != nil || out[TypeEvaluator] != 1 {
		t.Fatalf("erased %v %v", out, err)
	}
	if _, err := svc.Verification(ctx, vid, func(string) bool { return true }); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a sampled VERIFY survived its agent's erasure: %v", err)
	}
}

// TestOnlineSampleRate: an evaluator at 0.1 grades 1,000 plans' worth of
// sample within the binomial bounds (four standard deviations of 100).
func TestOnlineSampleRate(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 plans")
	}
	svc, _, _ := gradingService(t, nil, JudgeRetry{})
	ctx := context.Background()
	const agent = "agent-rate"
	if _, _, err := svc.PutEvaluator(ctx, agent, "ten-percent", []byte(`{"criteria":[{"criterion_id":"few","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <= 5","weight":1}],"sample":0.1}`)); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err := runUnbound(t, svc, agent, fmt.Sprintf("plan-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	n, token := 0, ""
	for {
		page, err := svc.EvaluatorVerifications(ctx, agent, "ten-percent", 100, token)
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Verifications)
		if token = page.NextToken; token == "" {
			break
		}
	}
	if n < 62 || n > 138 {
		t.Fatalf("sampled %d of 1,000 at 0.1", n)
	}
	t.Logf("sampled %d of 1,000 plans at 0.1", n)
}

// TestEvaluatorBounds: criteria whose weights are all 0 grade with a plain
// mean (not a policy that can never grade); an evaluator over 64 KiB is
// refused; concurrent creates never pass MaxEvaluators.
func TestEvaluatorBounds(t *testing.T) {
	svc, _, _ := gradingService(t, nil, JudgeRetry{})
	ctx := context.Background()
	const agent = "agent-bounds"
	zero := `{"criteria":[{"criterion_id":"few","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <= 5","weight":0}],"sample":1}`
	if _, _, err := svc.PutEvaluator(ctx, agent, "zero", []byte(zero)); err != nil {
		t.Fatal(err)
	}
	if err := runUnbound(t, svc, agent, "z-1"); err != nil {
		t.Fatal(err)
	}
	vr, err := svc.Verification(ctx, anticipate.SampledVerificationIDFor(agent, "zero", "z-1"), func(string) bool { return true })
	if err != nil || vr.Verification.Verdict != anticipate.VerdictPass {
		t.Fatalf("zero weights: %+v %v", vr, err)
	}
	big := `{"criteria":[{"criterion_id":"x","description":"` + strings.Repeat("d", 70_000) + `","measurement":"DETERMINISTIC","assertion":"step_count <= 5","weight":1}],"sample":1}`
	if _, _, err := svc.PutEvaluator(ctx, agent, "big", []byte(big)); !errs.Is(err, errs.Invalid) {
		t.Fatalf("a 70 KB evaluator: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 3 * MaxEvaluators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _ = svc.PutEvaluator(ctx, agent, fmt.Sprintf("e-%02d", i), []byte(zero))
		}()
	}
	wg.Wait()
	if vs, err := svc.Evaluators(ctx, agent); err != nil || len(vs) != MaxEvaluators {
		t.Fatalf("%d evaluators after concurrent creates (%v)", len(vs), err)
	}
}
