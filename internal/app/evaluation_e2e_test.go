package app

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evaluation"
)

const seedAgent = "agent-gandalf-spell-executor-001"

// seedMessage returns the seed's ANTICIPATE as a map, for variants.
func seedMessage(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func signed(t *testing.T, m map[string]any) []byte {
	t.Helper()
	raw, _ := json.Marshal(m)
	b, err := anticipate.Sign(raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func variant(t *testing.T, antID, planID string, mut ...func(map[string]any)) []byte {
	m := seedMessage(t)
	m["anticipation_id"], m["plan_id"] = antID, planID
	for _, f := range mut {
		f(m)
	}
	return signed(t, m)
}

type evt map[string]any

func event(id, typ string, fields ...any) evt {
	e := evt{"protocol_version": "4.1", "event_id": id, "message_type": typ, "timestamp": time.Now().UTC().Format(time.RFC3339Nano)}
	for i := 0; i+1 < len(fields); i += 2 {
		e[fields[i].(string)] = fields[i+1]
	}
	return e
}

func obs(call string, value any, args ...any) map[string]any {
	if args == nil {
		args = []any{}
	}
	return map[string]any{"call": call, "args": args, "value": value}
}

// run posts a standard onboarding execution: steps TOOL_REQUEST/STEP_COMPLETE
// pairs, then OUTCOME with the given observations, then PLAN_COMPLETE.
func runPlan(t *testing.T, e *testEnv, plan string, steps int, tools []string, observations []any) {
	t.Helper()
	n := 0
	post := func(ev evt) {
		t.Helper()
		n++
		e.must(202, e.call("POST", "/v1/executions/"+plan+"/events", ev))
	}
	for i := 0; i < steps; i++ {
		tool := "iam_create_user"
		if i < len(tools) {
			tool = tools[i]
		}
		post(event(plan+"-req-"+itoa(i), "TOOL_REQUEST", "tool", tool, "arguments", map[string]any{"username": "alice"}))
		post(event(plan+"-res-"+itoa(i), "TOOL_RESULT", "tool", tool, "status", "SUCCESS"))
		post(event(plan+"-step-"+itoa(i), "STEP_COMPLETE"))
	}
	post(event(plan+"-outcome", "OUTCOME", "variables", map[string]any{"target_username": "alice"}, "observations", observations))
	post(event(plan+"-done", "PLAN_COMPLETE"))
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+i))) }

func allGood() []any {
	return []any{
		obs("user_exists", true, "alice"),
		obs("group_member", true, "alice", "engineering"),
		obs("policy_count", 3, "alice"),
		obs("group_policy_count", 3, "engineering"),
	}
}

// waitVerification waits for the one VERIFY of an anticipation and for
// the model judge's grading of it to end (no criterion awaiting it).
func (e *testEnv) waitVerification(antID string) anticipate.Verification {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out struct{ Verifications []anticipate.Verification }
		e.must(200, e.call("GET", "/v1/anticipations/"+antID+"/verifications", nil)).json(e.t, &out)
		if len(out.Verifications) > 1 {
			e.t.Fatalf("%d verifications for one plan", len(out.Verifications))
		}
		if len(out.Verifications) == 1 && !awaitingJudge(out.Verifications[0]) {
			return out.Verifications[0]
		}
		if time.Now().After(deadline) {
			e.explainNoVerify(antID)
			e.t.Fatalf("no VERIFY for %s", antID)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitingJudge reports whether a criterion of v waits for the model judge.
func awaitingJudge(v anticipate.Verification) bool {
	for _, r := range v.Results {
		if r.Status == anticipate.StatusPending && r.Evidence == "pending: awaiting the model judge" {
			return true
		}
	}
	return false
}

// executionEvents reads a plan's execution and its whole chain from GET
// /v1/executions/{planId}/events, limit events a page (0: the server's
// default), following nextToken; the execution is the first page's.
func (e *testEnv) executionEvents(plan string, limit int) (out struct {
	Execution evaluation.Execution
	Events    []evaluation.StoredEvent
}) {
	e.t.Helper()
	next := ""
	for pages := 0; ; pages++ {
		var page struct {
			Execution evaluation.Execution
			Events    []evaluation.StoredEvent
			NextToken string
		}
		e.must(200, e.call("GET", fmt.Sprintf("/v1/executions/%s/events?limit=%d&nextToken=%s", plan, limit, url.QueryEscape(next)), nil)).json(e.t, &page)
		if pages == 0 {
			out.Execution = page.Execution
		}
		if limit > 0 && len(page.Events) > limit {
			e.t.Fatalf("a page of %d events; limit %d", len(page.Events), limit)
		}
		out.Events = append(out.Events, page.Events...)
		if page.NextToken == "" {
			return out
		}
		next = page.NextToken
	}
}

func result(t *testing.T, v anticipate.Verification, id string) anticipate.Result {
	t.Helper()
	for _, r := range v.Results {
		if r.CriterionID == id {
			return r
		}
	}
	t.Fatalf("no result for %s", id)
	return anticipate.Result{}
}

func scenarioSeedEndToEnd(t *testing.T) {
	e := startEnv(t)
	seed := signed(t, seedMessage(t))
	var d evaluation.Declared
	e.must(201, e.call("POST", "/v1/anticipations", seed)).json(t, &d)
	if d.AnticipationID != "ant-20260624-001" || d.Sealed || !strings.HasPrefix(d.Digest, "sha256:") {
		t.Fatalf("declared: %+v", d)
	}
	e.must(200, e.call("POST", "/v1/anticipations", seed))
	// Modify before start.
	m := seedMessage(t)
	m["timestamp"] = "2026-06-24T10:05:00Z"
	modified := signed(t, m)
	e.must(200, e.call("PUT", "/v1/anticipations/ant-20260624-001", modified))
	var got struct {
		Sealed bool
		Digest string
	}
	e.must(200, e.call("GET", "/v1/anticipations/ant-20260624-001", nil)).json(t, &got)
	if got.Sealed || got.Digest == d.Digest {
		t.Fatalf("after modify: %+v", got)
	}
	// Seal on the first TOOL_REQUEST.
	e.must(202, e.call("POST", "/v1/executions/plan-abc123/events", event("e0", "TOOL_REQUEST", "tool", "iam_create_user", "arguments", map[string]any{"username": "alice"})))
	e.must(200, e.call("GET", "/v1/anticipations/ant-20260624-001", nil)).json(t, &got)
	if !got.Sealed {
		t.Fatal("the first TOOL_REQUEST must seal")
	}
	problem(t, e.must(409, e.call("PUT", "/v1/anticipations/ant-20260624-001", seed)))
	e.must(200, e.call("PUT", "/v1/anticipations/ant-20260624-001", modified))
	e.must(200, e.call("POST", "/v1/anticipations", modified))
	problem(t, e.must(409, e.call("POST", "/v1/anticipations", variant(t, "ant-late", "plan-abc123"))))
	// Execute: three steps in all.
	e.must(202, e.call("POST", "/v1/executions/plan-abc123/events", event("e1", "TOOL_RESULT", "tool", "iam_create_user", "status", "SUCCESS")))
	for _, id := range []string{"s1", "s2", "s3"} {
		e.must(202, e.call("POST", "/v1/executions/plan-abc123/events", event(id, "STEP_COMPLETE")))
	}
	e.must(202, e.call("POST", "/v1/executions/plan-abc123/events", event("out", "OUTCOME", "variables", map[string]any{"target_username": "alice"}, "observations", allGood())))
	done := event("done", "PLAN_COMPLETE")
	var first, again evaluation.Appended
	e.must(202, e.call("POST", "/v1/executions/plan-abc123/events", done)).json(t, &first)
	e.must(202, e.call("POST", "/v1/executions/plan-abc123/events", done)).json(t, &again)
	if first != again {
		t.Fatalf("a repeated event must answer the same: %+v vs %+v", first, again)
	}
	v := e.waitVerification("ant-20260624-001")
	if v.Verdict != anticipate.VerdictPass || v.Score != 1.0 || v.MessageType != "VERIFY" || v.PlanID != "plan-abc123" || v.AgentID != seedAgent {
		t.Fatalf("VERIFY: %+v", v)
	}
	if v.AnticipationDigest != got.Digest || v.ExecutionDigest != first.Digest {
		t.Fatalf("digests: anticipation %s (want %s), execution %s (want %s)", v.AnticipationDigest, got.Digest, v.ExecutionDigest, first.Digest)
	}
	if err := anticipate.CheckSeal(&v); err != nil {
		t.Fatalf("VERIFY d_dna_signature: %v", err)
	}
	var key struct {
		PublicKey string `json:"public_key"`
	}
	e.must(200, e.call("GET", "/v1/keys/verify", nil)).json(t, &key)
	pub, _ := base64.RawURLEncoding.DecodeString(key.PublicKey)
	if err := anticipate.VerifyEd25519(&v, ed25519.PublicKey(pub)); err != nil {
		t.Fatalf("server signature: %v", err)
	}
	// Events after completion are refused; the chain is closed.
	problem(t, e.must(409, e.call("POST", "/v1/executions/plan-abc123/events", event("late", "STEP_COMPLETE"))))
	// The same VERIFY by id.
	var byID anticipate.Verification
	e.must(200, e.call("GET", "/v1/verifications/"+v.VerificationID, nil)).json(t, &byID)
	if byID.DDNASignature != v.DDNASignature {
		t.Fatal("GET by id differs")
	}
}

func scenarioSeedVariants(t *testing.T) {
	e := startEnv(t)
	cases := []struct {
		name    string
		steps   int
		tools   []string
		obs     []any
		verdict anticipate.Verdict
		score   float64
		check   func(t *testing.T, v anticipate.Verification)
	}{
		{"four steps", 4, nil, allGood(), anticipate.VerdictPass, 0.861111, func(t *testing.T, v anticipate.Verification) {
			if r := result(t, v, "tc-001"); r.Status != anticipate.StatusFail {
				t.Fatalf("tc-001: %+v", r)
			}
		}},
		{"iam_remove_user", 3, []string{"iam_create_user", "iam_remove_user"}, allGood(), anticipate.VerdictFail, -1, func(t *testing.T, v anticipate.Verification) {
			if len(v.AntiCriteriaFailed) != 1 || v.AntiCriteriaFailed[0] != "ac-001" {
				t.Fatalf("anti_criteria_failed %v", v.AntiCriteriaFailed)
			}
		}},
		{"missing observation", 3, nil, []any{allGood()[0], allGood()[2], allGood()[3]}, anticipate.VerdictPass, 0.722222, func(t *testing.T, v anticipate.Verification) {
			r := result(t, v, "oc-001")
			if r.Status != anticipate.StatusErrored || r.Score == nil || *r.Score != 0 || !strings.Contains(r.Evidence, "group_member") {
				t.Fatalf("oc-001: %+v", r)
			}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ant, plan := "ant-v"+itoa(i), "plan-v"+itoa(i)
			e.must(201, e.call("POST", "/v1/anticipations", variant(t, ant, plan)))
			runPlan(t, e, plan, c.steps, c.tools, c.obs)
			v := e.waitVerification(ant)
			if v.Verdict != c.verdict || (c.score >= 0 && v.Score != c.score) {
				t.Fatalf("verdict %s score %v, want %s %v", v.Verdict, v.Score, c.verdict, c.score)
			}
			c.check(t, v)
		})
	}
}

func scenarioHumanGradeLifecycle(t *testing.T) {
	e := startEnv(t)
	body := variant(t, "ant-h", "plan-h", func(m map[string]any) {
		m["grading_policy"].(map[string]any)["grader_type"] = "COMPOSITE"
		ex := m["expectations"].(map[string]any)
		ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{
			"criterion_id": "oc-h", "description": "A reviewer confirms the onboarding email", "measurement": "HUMAN",
			"assertion": "The welcome email is correct", "weight": 0.5})
	})
	e.must(201, e.call("POST", "/v1/anticipations", body))
	runPlan(t, e, "plan-h", 3, nil, allGood())
	v := e.waitVerification("ant-h")
	if v.Verdict != anticipate.VerdictPending || result(t, v, "oc-h").Status != anticipate.StatusPending {
		t.Fatalf("pending: %+v", v)
	}
	path := "/v1/verifications/" + v.VerificationID + "/grades"
	hasErrorPath(t, e.must(400, e.call("POST", path, map[string]any{"criterion_id": "oc-h", "score": 1.5})), "score")
	problem(t, e.must(400, e.call("POST", path, map[string]any{"criterion_id": "nope", "score": 1})))
	problem(t, e.must(409, e.call("POST", path, map[string]any{"criterion_id": "tc-001", "score": 1})))
	e.must(403, e.call("POST", path, map[string]any{"criterion_id": "oc-h", "score": 1}, readerToken))
	var graded anticipate.Verification
	e.must(200, e.call("POST", path, map[string]any{"criterion_id": "oc-h", "score": 1, "rationale": "checked"})).json(t, &graded)
	if graded.Verdict != anticipate.VerdictPass || result(t, graded, "oc-h").GradedBy != "human:admin" {
		t.Fatalf("graded: %+v", graded)
	}
	if err := anticipate.CheckSeal(&graded); err != nil {
		t.Fatal(err)
	}
	problem(t, e.must(409, e.call("POST", path, map[string]any{"criterion_id": "oc-h", "score": 0})))
}

func scenarioHeuristicJudge(t *testing.T) {
	calls := 0
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		var req anticipate.JudgeRequest
		json.NewDecoder(r.Body).Decode(&req)
		switch req.CriterionID {
		case "oc-j":
			w.Write([]byte(`{"score": 0.9, "rationale": "looks right"}`))
		case "oc-bad":
			w.Write([]byte(`{"score": "excellent"}`))
		default:
			w.WriteHeader(500)
		}
	}))
	defer judge.Close()
	e := startEnv(t, func(c *Config) { c.JudgeURL = judge.URL; c.AllowPrivateJudge = true })
	body := variant(t, "ant-j", "plan-j", func(m map[string]any) {
		m["grading_policy"].(map[string]any)["grader_type"] = "MODEL"
		ex := m["expectations"].(map[string]any)
		ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any),
			map[string]any{"criterion_id": "oc-j", "description": "Tone is professional", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.5},
			map[string]any{"criterion_id": "oc-bad", "description": "Nonsense answer", "measurement": "HEURISTIC", "assertion": "x", "weight": 0.5})
	})
	e.must(201, e.call("POST", "/v1/anticipations", body))
	runPlan(t, e, "plan-j", 3, nil, allGood())
	v := e.waitVerification("ant-j")
	if r := result(t, v, "oc-j"); r.Status != anticipate.StatusPass || r.GradedBy != "model:judge" {
		t.Fatalf("judged: %+v", r)
	}
	if r := result(t, v, "oc-bad"); r.Status != anticipate.StatusPending || !strings.Contains(r.Evidence, "rejected") {
		t.Fatalf("a nonsense answer must leave the criterion pending with the reason: %+v", r)
	}
	if v.Verdict != anticipate.VerdictPending {
		t.Fatalf("verdict %s", v.Verdict)
	}
}

func scenarioAssertionsReadTheWatcher(t *testing.T) {
	e := startEnv(t)
	// The seed's agent keeps promises through the watcher.
	const ag = seedAgent
	card := registerAs(t, e, ag)
	_ = card
	e.must(200, e.call("POST", "/v1/agents/"+ag+"/expectations", raiseBody(payment("exp-1", ts(time.Hour)))))
	e.must(200, e.call("POST", "/v1/agents/"+ag+"/facts", map[string]any{"facts": []any{fact("invoice.42.exp-1", ts(0))}}))
	body := variant(t, "ant-w", "plan-w", func(m map[string]any) {
		ex := m["expectations"].(map[string]any)
		ex["trajectory_criteria"] = append(ex["trajectory_criteria"].([]any),
			map[string]any{"criterion_id": "tc-w", "description": "Kept its promise", "measurement": "DETERMINISTIC",
				"assertion": "expectation_state('exp-1') == 'satisfied' and lapse_count() == 0", "weight": 1.0})
	})
	e.must(201, e.call("POST", "/v1/anticipations", body))
	runPlan(t, e, "plan-w", 3, nil, allGood())
	v := e.waitVerification("ant-w")
	if r := result(t, v, "tc-w"); r.Status != anticipate.StatusPass {
		t.Fatalf("tc-w: %+v", r)
	}
}

func registerAs(t *testing.T, e *testEnv, agent string) []byte {
	t.Helper()
	ag := register(t, e, "1.0")
	_ = ag
	var card json.RawMessage
	e.must(200, e.call("GET", "/v1/agents/"+agentID, nil)).json(t, &card)
	e.must(200, e.call("PUT", "/v1/agents/"+agent, []byte(card)))
	return card
}

func scenarioDigestChainRecomputedAndTamperDetected(t *testing.T) {
	e := startEnv(t)
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-c", "plan-c")))
	runPlan(t, e, "plan-c", 3, nil, allGood())
	v := e.waitVerification("ant-c")
	out := e.executionEvents("plan-c", 2)
	hasErrorPath(t, e.must(400, e.call("GET", "/v1/executions/plan-c/events?nextToken=bm90LWEtdG9rZW4", nil)), "nextToken")
	hasErrorPath(t, e.must(400, e.call("GET", "/v1/executions/plan-c/events?limit=101", nil)), "limit")
	var raws [][]byte
	var digests []string
	for _, ev := range out.Events {
		raws = append(raws, ev.Event)
		digests = append(digests, ev.Digest)
	}
	if i, ok := anticipate.VerifyChain(raws, digests); !ok {
		t.Fatalf("stored chain breaks at %d", i)
	}
	if digests[len(digests)-1] != v.ExecutionDigest || out.Execution.Head != v.ExecutionDigest {
		t.Fatal("VERIFY execution_digest is not the chain head")
	}
	var a struct {
		Anticipation json.RawMessage
		Digest       string
	}
	e.must(200, e.call("GET", "/v1/anticipations/ant-c", nil)).json(t, &a)
	if d, _ := anticipate.Digest(a.Anticipation); d != v.AnticipationDigest || d != a.Digest {
		t.Fatalf("anticipation digest %s, VERIFY says %s", d, v.AnticipationDigest)
	}
	tampered := append([][]byte{}, raws...)
	tampered[3] = []byte(strings.Replace(string(raws[3]), "iam_create_user", "iam_remove_user", 1))
	if string(tampered[3]) == string(raws[3]) {
		t.Fatal("test did not tamper")
	}
	if i, ok := anticipate.VerifyChain(tampered, digests); ok || i != 3 {
		t.Fatalf("tampering event 3 detected at %d, ok=%v", i, ok)
	}
	v.Score = 0.1
	if anticipate.CheckSeal(&v) == nil {
		t.Fatal("a tampered VERIFY passes its seal")
	}
}

func scenarioEvaluationBadInput(t *testing.T) {
	e := startEnv(t)
	unsigned := seedMessage(t)
	raw, _ := json.Marshal(unsigned)
	r := e.must(400, e.call("POST", "/v1/anticipations", raw))
	if !strings.Contains(string(r.body), "sha256:") {
		t.Fatalf("the error must say how to compute the signature: %s", r.body)
	}
	for _, c := range []struct {
		name, path string
		mut        func(map[string]any)
	}{
		{"measurement", "expectations.outcome_criteria[0].measurement", func(m map[string]any) {
			m["expectations"].(map[string]any)["outcome_criteria"].([]any)[0].(map[string]any)["measurement"] = "VIBES"
		}},
		{"weight", "expectations.outcome_criteria[0].weight", func(m map[string]any) {
			m["expectations"].(map[string]any)["outcome_criteria"].([]any)[0].(map[string]any)["weight"] = 1.5
		}},
		{"grader", "grading_policy.grader_type", func(m map[string]any) { m["grading_policy"].(map[string]any)["grader_type"] = "ORACLE" }},
		{"duplicate id", "expectations.trajectory_criteria[0].criterion_id", func(m map[string]any) {
			m["expectations"].(map[string]any)["trajectory_criteria"].([]any)[0].(map[string]any)["criterion_id"] = "oc-001"
		}},
		{"assertion", "expectations.trajectory_criteria[0].assertion", func(m map[string]any) {
			m["expectations"].(map[string]any)["trajectory_criteria"].([]any)[0].(map[string]any)["assertion"] = "step_count <= ("
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.must(400, e.call("POST", "/v1/anticipations", variant(t, "ant-bad", "plan-bad", c.mut)))
			if !strings.Contains(string(r.body), c.path) {
				t.Fatalf("error does not name %s: %s", c.path, r.body)
			}
		})
	}
	e.must(404, e.call("GET", "/v1/anticipations/ant-bad", nil))
	problem(t, e.must(404, e.call("POST", "/v1/executions/plan-nobody/events", event("x", "TOOL_REQUEST", "tool", "t", "arguments", map[string]any{}))))
	e.must(403, e.call("POST", "/v1/anticipations", variant(t, "ant-o", "plan-o"), otherToken))
	e.must(403, e.call("POST", "/v1/anticipations", variant(t, "ant-o", "plan-o"), readerToken))
	problem(t, e.must(400, e.call("POST", "/v1/executions/plan-o/events", `{"event_id":"x","message_type":"DANCE","timestamp":"2026-01-01T00:00:00Z"}`)))
	e.must(404, e.call("POST", "/v1/verifications/vrf-nope/grades", map[string]any{"criterion_id": "x", "score": 1}))
	// A plan belongs to one agent: another agent's declaration of the same
	// plan id is another plan (scenarioTenantsPlansApart covers the rest).
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-own", "plan-own")))
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-intruder", "plan-own", func(m map[string]any) { m["agent_id"] = "someone-else" }), otherToken))
	// A token acting for both agents must name the agent.
	r = e.must(400, e.call("POST", "/v1/executions/plan-own/events", event("own-1", "TOOL_REQUEST", "tool", "t", "arguments", map[string]any{})))
	problem(t, r)
	if !strings.Contains(string(r.body), `"agent_id"`) {
		t.Fatalf("the error must name agent_id: %s", r.body)
	}
	e.must(202, e.call("POST", "/v1/executions/plan-own/events", event("own-1", "TOOL_REQUEST", "tool", "t", "arguments", map[string]any{}, "agent_id", seedAgent)))
}

func scenarioVerifySurvivesCrashBeforeFeed(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.PauseFeed = true })
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-k", "plan-k")))
	runPlan(t, e, "plan-k", 3, nil, allGood())
	time.Sleep(100 * time.Millisecond)
	var out struct{ Verifications []anticipate.Verification }
	e.must(200, e.call("GET", "/v1/anticipations/ant-k/verifications", nil)).json(t, &out)
	if len(out.Verifications) != 0 {
		t.Fatal("no VERIFY may run while the feed is stopped")
	}
	e.stop()
	e.cfg.PauseFeed = false
	e.restart()
	v := e.waitVerification("ant-k")
	if v.Verdict != anticipate.VerdictPass {
		t.Fatalf("%+v", v)
	}
	// Replaying the whole feed again produces no second VERIFY.
	e.stop()
	e.restart()
	if err := e.verify("agent-1", "plan-k"); err != nil {
		t.Fatal(err)
	}
	e.waitVerification("ant-k")
}

// scenarioLongPlanVerified runs a plan of 10,000 events whose OUTCOMEs
// carry 5 MB of observations, exported as an instrumented agent would
// (OTLP, 500 spans a request, each span an OUTCOME; PLAN_COMPLETE in the
// last request): its aggregate outgrows any one item (the store's limit is
// 400 KB) and is kept in chunks (anticipate.ChunkBytes), and the plan is
// verified like a plan of ten, on both runtimes.
func scenarioLongPlanVerified(t *testing.T) {
	e := startEnv(t)
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-long", "plan-long")))
	const n, batch = 10000, 500
	pad := strings.Repeat("x", 480)
	start := time.Now()
	e.must(202, e.call("POST", "/v1/executions/plan-long/events", event("long-first", "STEP_COMPLETE")))
	str := func(k, v string) string {
		b, _ := json.Marshal(v)
		return fmt.Sprintf(`{"key":%q,"value":{"stringValue":%s}}`, k, b)
	}
	t0 := time.Now().Add(-time.Hour).UnixNano()
	span := func(i int, attrs ...string) string {
		return fmt.Sprintf(`{"traceId":"0000000000000000000000000000106e","spanId":"%016x","name":"outcome","startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[%s]}`,
			i+1, t0+int64(i)*1000, t0+int64(i)*1000+500, strings.Join(append(attrs, str("aigp.plan_id", "plan-long")), ","))
	}
	var spans []string
	for i := range n - 3 {
		o, _ := json.Marshal([]any{obs("metric", pad, fmt.Sprintf("k%d", i))})
		spans = append(spans, span(i, str("aigp.message_type", "OUTCOME"), str("aigp.observations", string(o))))
	}
	vars, _ := json.Marshal(map[string]any{"target_username": "alice"})
	good, _ := json.Marshal(allGood())
	spans = append(spans, span(n, str("aigp.message_type", "OUTCOME"), str("aigp.variables", string(vars)), str("aigp.observations", string(good))),
		span(n+1, str("aigp.message_type", "PLAN_COMPLETE")))
	for len(spans) > 0 {
		k := min(batch, len(spans))
		body := `{"resourceSpans":[{"resource":{"attributes":[` + str("gen_ai.agent.id", "agent-gandalf-spell-executor-001") + `]},"scopeSpans":[{"spans":[` + strings.Join(spans[:k], ",") + `]}]}]}`
		if r := e.must(200, e.call("POST", "/v1/traces", body)); string(r.body) != "{}" {
			t.Fatalf("an export's answer: %s", r.body)
		}
		spans = spans[k:]
	}
	appended := time.Since(start)
	v := e.waitVerification("ant-long")
	var page struct {
		Execution struct{ Count int } `json:"execution"`
	}
	e.must(200, e.call("GET", "/v1/executions/plan-long/events?limit=1", nil)).json(t, &page)
	t.Logf("%d events (%d KB of observations) appended in %s (%.0f/s) through OTLP; VERIFY %s after PLAN_COMPLETE: %s",
		page.Execution.Count, (n-3)*len(pad)/1024, appended.Round(time.Millisecond), float64(n)/appended.Seconds(), time.Since(start)-appended, v.Verdict)
	if page.Execution.Count != n || v.Verdict != anticipate.VerdictPass {
		t.Fatalf("a long plan: %d events, VERIFY %s %+v", page.Execution.Count, v.Verdict, v.Results)
	}
}
