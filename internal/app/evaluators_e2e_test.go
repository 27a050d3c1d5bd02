package app

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evidence"
	"github.com/agentclock/clockwork/internal/regrade"
)

// scenarioOnlineEvaluators: an agent's plans that declare no ANTICIPATE
// are refused until it has an online evaluator. With one sampling 0.1 of
// the plans whose id starts "on-", 1,000 such plans exported as OTLP
// traces get exactly the VERIFYs the evaluator's draw picks, within the
// binomial bounds; each is marked sampled, names its evaluator, has no
// anticipation digest, and its evidence bundle passes the offline check,
// which notes that nothing was declared before the run. A second
// evaluator with a HEURISTIC criterion has the model judge grade its
// sample. Another tenant cannot read or change the evaluators.
func scenarioOnlineEvaluators(t *testing.T) {
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"score": 0.8, "rationale": "reads well"}`))
	}))
	defer judge.Close()
	e := startEnv(t, func(c *Config) { c.JudgeURL, c.AllowPrivateJudge = judge.URL, true })
	const agent = "agent-online"
	step := map[string]any{"event_id": "ev-1", "message_type": "STEP_COMPLETE", "timestamp": ts(0), "agent_id": agent}
	r := e.call("POST", "/v1/executions/lonely-1/events", step)
	e.must(404, r)
	if !strings.Contains(string(r.body), "evaluator") {
		t.Fatalf("the refusal does not say how to grade such plans: %s", r.body)
	}
	tenPercent := map[string]any{"criteria": []any{map[string]any{"criterion_id": "few-steps", "description": "at most five steps",
		"measurement": "DETERMINISTIC", "assertion": "step_count <= 5", "weight": 1}}, "sample": 0.1, "filter": map[string]any{"planIdPrefix": "on-"}}
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agent+"/evaluators/ten-percent", map[string]any{"criteria": tenPercent["criteria"], "sample": 0})), "sample")
	e.must(201, e.call("PUT", "/v1/agents/"+agent+"/evaluators/ten-percent", tenPercent))
	e.must(201, e.call("PUT", "/v1/agents/"+agent+"/evaluators/tone", map[string]any{"criteria": []any{map[string]any{"criterion_id": "tone",
		"description": "polite", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 1}},
		"sample": 1, "filter": map[string]any{"planIdPrefix": "on-00"}}))
	e.must(403, e.call("GET", "/v1/agents/"+agent+"/evaluators/ten-percent", nil, otherToken))
	e.must(403, e.call("PUT", "/v1/agents/"+agent+"/evaluators/ten-percent", tenPercent, otherToken))
	var list struct{ Evaluators []map[string]any }
	e.must(200, e.call("GET", "/v1/agents/"+agent+"/evaluators", nil)).json(t, &list)
	if len(list.Evaluators) != 2 {
		t.Fatalf("evaluators %+v", list)
	}

	// Which plans the draw picks, as the evaluator stored decides it.
	body, _ := json.Marshal(tenPercent)
	ev, err := regrade.ParseEvaluator(agent, "ten-percent", body)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	want := map[string]bool{}
	for i := range n {
		if id := fmt.Sprintf("on-%03d", i); ev.Sampled(agent, id) {
			want[anticipate.SampledVerificationIDFor(agent, "ten-percent", id)] = true
		}
	}
	// Within four standard deviations of n·0.1.
	mean, sd := float64(n)*0.1, math.Sqrt(float64(n)*0.1*0.9)
	if k := float64(len(want)); k < mean-4*sd || k > mean+4*sd {
		t.Fatalf("the draw picks %d of %d at 0.1, outside the binomial bounds", len(want), n)
	}
	phase := time.Now()
	exportPlans(t, e, agent, n, func(i int) (string, []byte) { return fmt.Sprintf("on-%03d", i), nil }, regradeShape)
	t.Logf("%s: %d plans without an ANTICIPATE exported in %s", backendKind, n, time.Since(phase).Round(time.Millisecond))

	got := map[string]anticipate.Verification{}
	for deadline := time.Now().Add(300 * time.Second); len(got) < len(want); time.Sleep(500 * time.Millisecond) {
		clear(got)
		for token := ""; ; {
			var page struct {
				Verifications []anticipate.Verification
				NextToken     string
			}
			e.must(200, e.call("GET", "/v1/agents/"+agent+"/evaluators/ten-percent/verifications?nextToken="+token, nil)).json(t, &page)
			for _, v := range page.Verifications {
				got[v.VerificationID] = v
			}
			if token = page.NextToken; token == "" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d sampled VERIFYs after 300 s", len(got), len(want))
		}
	}
	t.Logf("%s: %d of %d plans sampled at 0.1, VERIFYs in %s", backendKind, len(got), n, time.Since(phase).Round(time.Millisecond))
	for id, v := range got {
		if !want[id] {
			t.Fatalf("VERIFY %s of a plan the draw did not pick", id)
		}
		if !v.Sampled || v.Evaluator != "ten-percent" || v.AnticipationDigest != "" || v.AnticipationID != "evaluator:ten-percent" {
			t.Fatalf("sampled VERIFY %+v", v)
		}
	}
	for id := range got {
		bundle := e.must(200, e.call("GET", "/v1/verifications/"+id+"/bundle", nil)).body
		rep := evidence.Check(bundle, evidence.Options{})
		if !rep.OK() || !strings.Contains(strings.Join(rep.Notes, " "), "no ANTICIPATE was declared before the run") {
			t.Fatalf("the offline check of a sampled VERIFY: %+v %v", rep.Findings, rep.Notes)
		}
		// The criteria are tied to the signed VERIFY: other criteria,
		// even re-signed, are refused.
		var doc map[string]json.RawMessage
		_ = json.Unmarshal(bundle, &doc)
		var ant map[string]any
		_ = json.Unmarshal(doc["anticipation"], &ant)
		ant["expectations"].(map[string]any)["outcome_criteria"].([]any)[0].(map[string]any)["assertion"] = "step_count <= 50"
		delete(ant, anticipate.SignatureField)
		b, _ := json.Marshal(ant)
		resigned, err := anticipate.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		doc["anticipation"] = resigned
		tampered, _ := json.Marshal(doc)
		if rep := evidence.Check(tampered, evidence.Options{}); rep.OK() || rep.FirstBroken().Link != "verification.criteria_digest" {
			t.Fatalf("the offline check of a bundle with other criteria: %+v", rep.Findings)
		}
		break
	}
	// The judge grades the other evaluator's sample (on-000 … on-009).
	vid := anticipate.SampledVerificationIDFor(agent, "tone", "on-003")
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var v anticipate.Verification
		if r := e.call("GET", "/v1/verifications/"+vid, nil); r.status == 200 {
			r.json(t, &v)
			if v.Verdict == anticipate.VerdictPass && result(t, v, "tone").GradedBy == "model:judge" && v.Sampled {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the judge never graded %s: %+v", vid, v)
		}
	}
	e.must(403, e.call("GET", "/v1/agents/"+agent+"/evaluators/tone/verifications", nil, otherToken))
	e.must(204, e.call("DELETE", "/v1/agents/"+agent+"/evaluators/tone", nil))
	e.must(404, e.call("GET", "/v1/agents/"+agent+"/evaluators/tone", nil))
}
