package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evalcli"
	"github.com/agentclock/clockwork/internal/regrade"
)

// regradeRubric is the changed rubric: a step bound, a judged criterion
// and an anti criterion, as POST /v1/evaluations takes them (flat, each
// with its category).
var regradeRubric = []map[string]any{
	{"criterion_id": "few-steps", "description": "at most two steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 2", "weight": 0.6},
	{"criterion_id": "judged", "description": "the work reads well", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.4, "category": "trajectory"},
	{"criterion_id": "no-delete", "description": "never deletes a user", "measurement": "DETERMINISTIC", "assertion": "tool_invoked('iam_delete_user') == false", "weight": 1, "category": "anti"},
}

var regradePolicy = map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.7, "weighted_scoring": true, "fail_on_any_anti_criteria": true}

// regradeLong is the index of the one long plan among the stored ones.
const regradeLong = 200

// regradeShape is plan i's execution: i%4 tool steps (a TOOL_REQUEST
// and a STEP_COMPLETE each), the last one a user's deletion when
// i%5 == 4 (20 shapes).
func regradeShape(i int) (steps int, tools []string) {
	if i == regradeLong {
		return 400, nil // with 400 observations (runPlans), so that its aggregate spills a chunk
	}
	steps = i % 4
	if i%5 == 4 {
		steps = max(steps, 1)
		tools = make([]string, steps)
		for k := range tools {
			tools[k] = "iam_create_user"
		}
		tools[steps-1] = "iam_delete_user"
	}
	return steps, tools
}

// scenarioRegrading: 200 stored plans, graded when they ran against the
// seed's rubric, are re-graded with a changed rubric through POST
// /v1/evaluations. Every result equals what a fresh VERIFY of an
// execution of the same shape against that rubric gives (criteria,
// score, verdict; the judge called for the HEURISTIC criterion); the
// plans' own VERIFYs are unchanged; the summary counts the changed
// verdicts; another tenant can neither start nor read it; and the CLI
// exits 1 under the bar, 0 over it and 2 on a criterion that does not
// compile.
func scenarioRegrading(t *testing.T) {
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"score": 0.9, "rationale": "reads well"}`))
	}))
	defer judge.Close()
	e := startEnv(t, func(c *Config) { c.JudgeURL, c.AllowPrivateJudge = judge.URL, true })
	agent, _ := seedMessage(t)["agent_id"].(string)
	const n = 200 // and the long plan, rg-200
	// The fresh plans: one per shape, declared with the new rubric.
	fresh := func(m map[string]any) {
		ex := map[string]any{"outcome_criteria": []any{}, "trajectory_criteria": []any{}, "anti_criteria": []any{}}
		for _, c := range regradeRubric {
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
		m["expectations"], m["grading_policy"] = ex, regradePolicy
	}
	from := time.Now().UTC()
	phase := time.Now()
	runPlans(t, e, agent, n+1, func(i int) (string, []byte) {
		return fmt.Sprintf("rg-%03d", i), variant(t, fmt.Sprintf("ant-rg-%03d", i), fmt.Sprintf("rg-%03d", i))
	})
	to := time.Now().UTC()
	runPlans(t, e, agent, 20, func(i int) (string, []byte) {
		return fmt.Sprintf("rg-fresh-%02d", i), variant(t, fmt.Sprintf("ant-rg-fresh-%02d", i), fmt.Sprintf("rg-fresh-%02d", i), fresh)
	})
	t.Logf("%s: %d plans run in %s", backendKind, n+1+20, time.Since(phase).Round(time.Millisecond))
	phase = time.Now()
	var long struct {
		Execution struct {
			Aggregate struct {
				Chunks int `json:"chunks"`
			} `json:"aggregate"`
		} `json:"execution"`
	}
	e.must(200, e.call("GET", fmt.Sprintf("/v1/executions/rg-%03d/events?limit=1", regradeLong), nil)).json(t, &long)
	if long.Execution.Aggregate.Chunks == 0 {
		t.Fatal("the long plan's aggregate spilled no chunk: the re-grade would not read one")
	}
	originals := map[string]anticipate.Verification{}
	for i := range n + 1 {
		v := e.waitVerification(fmt.Sprintf("ant-rg-%03d", i))
		originals[v.PlanID] = v
	}
	freshV := make([]anticipate.Verification, 20)
	for i := range freshV {
		freshV[i] = e.waitVerification(fmt.Sprintf("ant-rg-fresh-%02d", i))
	}

	t.Logf("%s: their VERIFYs read in %s", backendKind, time.Since(phase).Round(time.Millisecond))
	body := map[string]any{"filter": map[string]any{"agentId": agent, "from": from.Format(time.RFC3339Nano), "to": to.Format(time.RFC3339Nano)},
		"criteria": regradeRubric, "gradingPolicy": regradePolicy}
	// Another tenant may not start it, nor name the plans.
	e.must(403, e.call("POST", "/v1/evaluations", body, otherToken))
	r := e.call("POST", "/v1/evaluations", map[string]any{"filter": map[string]any{"planIds": []string{"rg-000"}}, "criteria": regradeRubric[:1]}, otherToken)
	e.must(400, r)
	hasErrorPath(t, r, "filter.planIds[0]")
	started := time.Now()
	var ev struct {
		EvaluationID string `json:"evaluationId"`
		State        string `json:"state"`
		Progress     struct{ Done, Total int }
	}
	e.must(202, e.call("POST", "/v1/evaluations", body)).json(t, &ev)
	if ev.State != "running" || ev.Progress.Total != n+1 {
		t.Fatalf("started: %+v", ev)
	}
	e.must(404, e.call("GET", "/v1/evaluations/"+ev.EvaluationID, nil, otherToken))
	var results []regrade.Result
	var summary regrade.Summary
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var page struct {
			State     string
			Progress  struct{ Done, Total int }
			Results   []regrade.Result
			NextToken string
			Summary   regrade.Summary
		}
		e.must(200, e.call("GET", "/v1/evaluations/"+ev.EvaluationID+"?limit=1", nil)).json(t, &page)
		if page.State == "done" {
			summary = page.Summary
			break
		}
		if page.State != "running" || time.Now().After(deadline) {
			t.Fatalf("evaluation %s after %s: %+v", page.State, time.Since(started), page.Progress)
		}
	}
	elapsed := time.Since(started)
	for token := ""; ; {
		var page struct {
			Results   []regrade.Result
			NextToken string
		}
		e.must(200, e.call("GET", "/v1/evaluations/"+ev.EvaluationID+"?nextToken="+token, nil)).json(t, &page)
		results = append(results, page.Results...)
		if token = page.NextToken; token == "" {
			break
		}
	}
	if len(results) != n+1 {
		t.Fatalf("%d results, want %d", len(results), n+1)
	}
	changed := 0
	for _, r := range results {
		var i int
		if _, err := fmt.Sscanf(r.PlanID, "rg-%03d", &i); err != nil || r.Error != "" {
			t.Fatalf("result %+v", r)
		}
		if i == regradeLong {
			// Its aggregate is read from its chunks: 400 steps, no deletion.
			if r.Verdict != anticipate.VerdictFail || result(t, *r.Verification, "few-steps").Evidence != "assertion evaluated to false with step_count=400" ||
				result(t, *r.Verification, "no-delete").Status != anticipate.StatusPass {
				t.Fatalf("the long plan: %+v", r.Criteria)
			}
			if r.Changed() {
				changed++
			}
			continue
		}
		f := freshV[i%20]
		// The judge's request names the VERIFY (verification_id), so its
		// digest is the one thing that differs.
		if !samePromptless(r.Criteria, f.Results) || r.Verdict != f.Verdict || *r.Score != f.Score {
			t.Fatalf("%s re-graded %s %v %+v; a fresh VERIFY of its shape: %s %v %+v", r.PlanID, r.Verdict, *r.Score, r.Criteria, f.Verdict, f.Score, f.Results)
		}
		o := originals[r.PlanID]
		if r.OriginalVerdict != o.Verdict || *r.OriginalScore != o.Score || r.OriginalVerificationID != o.VerificationID {
			t.Fatalf("%s: original %s %v, stored %s %v", r.PlanID, r.OriginalVerdict, *r.OriginalScore, o.Verdict, o.Score)
		}
		if r.Verification == nil || anticipate.CheckSeal(r.Verification) != nil || r.Verification.ServerSignature == "" {
			t.Fatalf("%s: the result is not a sealed, signed record: %+v", r.PlanID, r.Verification)
		}
		if r.Changed() {
			changed++
		}
	}
	if summary.ChangedCount != changed || summary.Graded != n+1 {
		t.Errorf("summary: %d changed, %d graded; counted %d changed", summary.ChangedCount, summary.Graded, changed)
	}
	for i := 0; i < n; i += 37 {
		if v := e.waitVerification(fmt.Sprintf("ant-rg-%03d", i)); !reflect.DeepEqual(v, originals[v.PlanID]) {
			t.Fatalf("the VERIFY of %s changed", v.PlanID)
		}
	}
	t.Logf("%s: re-graded %d plans (one judge call each, when the anti criterion let the verdict wait for it) in %s; pass rate %v, %d verdicts changed",
		backendKind, n+1, elapsed.Round(time.Millisecond), *summary.PassRate, changed)

	// The CLI, as a CI job runs it.
	dir := t.TempDir()
	crit := filepath.Join(dir, "criteria.json")
	b, _ := json.Marshal(map[string]any{"criteria": regradeRubric, "gradingPolicy": regradePolicy})
	os.WriteFile(crit, b, 0o600)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"criterion_id":"x","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <=","weight":1}]`), 0o600)
	// The first 20 plans are one of each shape: their pass rate is the 200's.
	var first20 []string
	for i := range 20 {
		first20 = append(first20, fmt.Sprintf("rg-%03d", i))
	}
	filter := "agentId=" + agent + ",planIds=" + strings.Join(first20, "|")
	cli := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := evalcli.Run(context.Background(), append([]string{"--server", e.srv.URL, "--token", adminToken, "--poll", "100ms", "--timeout", "2m"}, args...), &out, &errOut, func(string) string { return "" })
		return code, out.String(), errOut.String()
	}
	rate := *summary.PassRate
	if code, out, errOut := cli("--filter", filter, "--criteria", crit, "--fail-under", fmt.Sprint(rate+0.01)); code != evalcli.ExitFail ||
		!strings.Contains(errOut, "FAIL: pass rate") || !strings.Contains(out, "rg-019") || !strings.Contains(out, "few-steps") {
		t.Errorf("under the bar: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut := cli("--filter", filter, "--criteria", crit, "--fail-under", fmt.Sprint(rate)); code != evalcli.ExitPass || !strings.Contains(errOut, "PASS") {
		t.Errorf("at the bar: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := cli("--filter", filter, "--criteria", bad, "--fail-under", "0.5"); code != evalcli.ExitError || !strings.Contains(errOut, "criteria[0].assertion") {
		t.Errorf("a criterion that does not compile: exit %d\n%s", code, errOut)
	}
}

// samePromptless compares results but for the judge request's digest,
// which must be there on a model's grade.
func samePromptless(a, b []anticipate.Result) bool {
	strip := func(rs []anticipate.Result) []anticipate.Result {
		out := make([]anticipate.Result, len(rs))
		for i, r := range rs {
			if (r.GradedBy == "model:judge") != (r.PromptDigest != "") {
				return nil
			}
			r.PromptDigest = ""
			out[i] = r
		}
		return out
	}
	sa, sb := strip(a), strip(b)
	return sa != nil && sb != nil && reflect.DeepEqual(sa, sb)
}

// runPlans declares plan i's ANTICIPATE (eight at once) and then exports
// the executions of every plan (shape regradeShape(i)) as OTLP/JSON traces
// the way an instrumented agent does, 50 plans an export: tool spans,
// STEP_COMPLETE and OUTCOME spans and the plan's root span.
func runPlans(t *testing.T, e *testEnv, agent string, n int, plan func(i int) (string, []byte)) {
	t.Helper()
	exportPlans(t, e, agent, n, plan, regradeShape)
}

// exportPlans is runPlans with the shape of each plan given; a plan
// whose ANTICIPATE is nil declares none.
func exportPlans(t *testing.T, e *testEnv, agent string, n int, plan func(i int) (string, []byte), shape func(i int) (steps int, tools []string)) {
	t.Helper()
	post := func(path, contentType string, b []byte, want int) error {
		req, _ := http.NewRequest("POST", e.srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", contentType)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var p bytes.Buffer
		p.ReadFrom(res.Body)
		// An OTLP answer that lists rejected spans is a partial failure.
		if res.StatusCode != want || strings.Contains(p.String(), "rejectedSpans") {
			return fmt.Errorf("POST %s: %d %s", path, res.StatusCode, p.String())
		}
		return nil
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 8)
	ids := make([]string, n)
	for i := range n {
		id, ant := plan(i)
		ids[i] = id
		if ant == nil {
			continue // a plan that declares no ANTICIPATE
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := post("/v1/anticipations", "application/json", ant, 201); err != nil {
				mu.Lock()
				first = err
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		t.Fatal(first)
	}
	str := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	for lo := 0; lo < n; lo += 50 {
		var spans []any
		for i := lo; i < min(n, lo+50); i++ {
			id := ids[i]
			trace := fmt.Sprintf("%032x", 1<<20+i)
			at := time.Now().Add(-time.Minute)
			nano := func(d time.Duration) string { return fmt.Sprint(at.Add(d).UnixNano()) }
			span := func(k int, name string, attrs ...map[string]any) {
				spans = append(spans, map[string]any{"traceId": trace, "spanId": fmt.Sprintf("%016x", k+1), "name": name, "kind": 1,
					"startTimeUnixNano": nano(time.Duration(k) * time.Millisecond), "endTimeUnixNano": nano(time.Duration(k)*time.Millisecond + 500*time.Microsecond),
					"attributes": append([]map[string]any{str("aigp.plan_id", id), str("gen_ai.agent.id", agent)}, attrs...)})
			}
			steps, tools := shape(i)
			k := 1
			for s := 0; s < steps; s++ {
				tool := "iam_create_user"
				if s < len(tools) {
					tool = tools[s]
				}
				span(k, "execute_tool "+tool, str("gen_ai.operation.name", "execute_tool"), str("gen_ai.tool.name", tool),
					str("gen_ai.tool.call.arguments", `{"username":"alice"}`))
				span(k+1, "step", str("aigp.message_type", "STEP_COMPLETE"))
				k += 2
			}
			observations := allGood()
			if i == regradeLong {
				// Enough observations that the aggregate spills a chunk.
				for k := range 400 {
					observations = append(observations, obs(fmt.Sprintf("extra_%03d", k), true))
				}
			}
			obs, _ := json.Marshal(observations)
			span(k, "outcome", str("aigp.message_type", "OUTCOME"), str("aigp.variables", `{"target_username":"alice"}`), str("aigp.observations", string(obs)))
			root := map[string]any{"key": "aigp.plan_root", "value": map[string]any{"boolValue": true}}
			span(k+1, "invoke_agent", str("gen_ai.operation.name", "invoke_agent"), root)
		}
		body, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{"resource": map[string]any{"attributes": []any{str("service.name", "regrading-test")}},
			"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "test"}, "spans": spans}}}}})
		if err := post("/v1/traces", "application/json", body, 200); err != nil {
			t.Fatal(err)
		}
	}
}
