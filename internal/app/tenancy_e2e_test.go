package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
)

// tenantAnticipation is the seed's ANTICIPATE declared for agent, bound to
// plan, or (plan "") to the scope envelope alone.
func tenantAnticipation(t *testing.T, antID, agent, plan, scope string) []byte {
	return variant(t, antID, plan, func(m map[string]any) {
		m["agent_id"] = agent
		m["scope_envelope_id"] = scope
		if plan == "" {
			delete(m, "plan_id")
		}
	})
}

// sameAsUnknown fails unless got is the 404 that the same request names
// with unknownID instead of id answers (so ids and owners cannot be probed).
func sameAsUnknown(t *testing.T, got, unknown resp, id, unknownID string) {
	t.Helper()
	if got.status != 404 || unknown.status != 404 || strings.ReplaceAll(string(unknown.body), unknownID, id) != string(got.body) {
		t.Fatalf("another tenant's %q answers %d %s; an unknown id answers %d %s", id, got.status, got.body, unknown.status, unknown.body)
	}
}

// scenarioTenantsPlansApart: two tenants, each a token bound to one agent,
// reuse one scope envelope and one plan id. Neither's declarations bind to
// the other's plan, neither reads, appends to or completes the other's
// execution, and a plan id declared first by one does not block the other
// (issue 27, findings 1 and 4).
func scenarioTenantsPlansApart(t *testing.T) {
	e := startEnv(t)
	const scope = "scope-shared"
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-a", "agent-a", "", scope), tenantA))
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-b", "agent-b", "", scope), tenantB))

	// A's first event for plan P, without agent_id, binds A's declaration only.
	first := event("p-1", "TOOL_REQUEST", "tool", "iam_create_user", "arguments", map[string]any{"user": "alice"}, "scope_envelope_id", scope)
	e.must(202, e.call("POST", "/v1/executions/plan-p/events", first, tenantA))
	var page struct {
		Execution struct {
			AgentID string   `json:"agent_id"`
			Bound   []string `json:"bound"`
			Agents  []string `json:"agents"`
		} `json:"execution"`
		Events []map[string]any `json:"events"`
	}
	e.must(200, e.call("GET", "/v1/executions/plan-p/events", nil, tenantA)).json(t, &page)
	if page.Execution.AgentID != "agent-a" || strings.Join(page.Execution.Bound, ",") != "ant-a" || strings.Join(page.Execution.Agents, ",") != "agent-a" {
		t.Fatalf("A's plan binds %v for %v (%s); want ant-a for agent-a alone", page.Execution.Bound, page.Execution.Agents, page.Execution.AgentID)
	}
	// B can neither read A's events nor complete A's plan, and learns
	// nothing it would not learn of a plan that does not exist.
	sameAsUnknown(t, e.call("GET", "/v1/executions/plan-p/events", nil, tenantB),
		e.call("GET", "/v1/executions/plan-nobody/events", nil, tenantB), "plan-p", "plan-nobody")
	complete := event("p-done", "PLAN_COMPLETE")
	sameAsUnknown(t, e.call("POST", "/v1/executions/plan-p/events", complete, tenantB),
		e.call("POST", "/v1/executions/plan-nobody/events", complete, tenantB), "plan-p", "plan-nobody")
	e.must(403, e.call("POST", "/v1/executions/plan-p/events", event("p-done", "PLAN_COMPLETE", "agent_id", "agent-a"), tenantB))
	e.must(200, e.call("GET", "/v1/executions/plan-p/events", nil, tenantA)).json(t, &page)
	if len(page.Events) != 1 {
		t.Fatalf("A's plan has %d events; B's attempts must add none", len(page.Events))
	}
	// B's anticipation is still open: A's plan did not seal it.
	var ant struct{ Sealed bool }
	e.must(200, e.call("GET", "/v1/anticipations/ant-b", nil, tenantB)).json(t, &ant)
	if ant.Sealed {
		t.Fatal("A's first event sealed B's anticipation")
	}

	// The other way round: B's plan under the same scope seals and grades
	// B's declaration only, and A can still change its unsealed one.
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-a2", "agent-a", "", "scope-two"), tenantA))
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-b2", "agent-b", "", "scope-two"), tenantB))
	e.must(202, e.call("POST", "/v1/executions/plan-q/events", event("q-1", "STEP_COMPLETE", "scope_envelope_id", "scope-two"), tenantB))
	e.must(202, e.call("POST", "/v1/executions/plan-q/events", event("q-2", "PLAN_COMPLETE"), tenantB))
	var vs struct{ Verifications []anticipate.Verification }
	waitVerificationAs(t, e, "ant-b2", tenantB)
	e.must(200, e.call("GET", "/v1/anticipations/ant-a2/verifications", nil, tenantA)).json(t, &vs)
	if len(vs.Verifications) != 0 {
		t.Fatalf("B's plan produced a VERIFY of A's anticipation: %+v", vs.Verifications)
	}
	e.must(200, e.call("GET", "/v1/anticipations/ant-a2", nil, tenantA)).json(t, &ant)
	if ant.Sealed {
		t.Fatal("B's events sealed A's anticipation")
	}
	e.must(200, e.call("PUT", "/v1/anticipations/ant-a2", tenantAnticipation(t, "ant-a2", "agent-a", "", "scope-three"), tenantA))

	// A plan id declared first by B neither blocks nor joins A's plan.
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-bx", "agent-b", "plan-x", scope), tenantB))
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-ax", "agent-a", "plan-x", scope), tenantA))
	e.must(202, e.call("POST", "/v1/executions/plan-x/events", event("x-1", "STEP_COMPLETE"), tenantA))
	e.must(200, e.call("GET", "/v1/executions/plan-x/events", nil, tenantA)).json(t, &page)
	if strings.Join(page.Execution.Bound, ",") != "ant-ax" {
		t.Fatalf("A's plan-x binds %v; want ant-ax alone", page.Execution.Bound)
	}
	sameAsUnknown(t, e.call("GET", "/v1/executions/plan-x/events", nil, tenantB),
		e.call("GET", "/v1/executions/plan-nobody/events", nil, tenantB), "plan-x", "plan-nobody")
	e.must(202, e.call("POST", "/v1/executions/plan-x/events", event("x-1", "STEP_COMPLETE"), tenantB))
	e.must(200, e.call("GET", "/v1/executions/plan-x/events", nil, tenantB)).json(t, &page)
	if strings.Join(page.Execution.Bound, ",") != "ant-bx" || len(page.Events) != 1 {
		t.Fatalf("B's plan-x binds %v with %d events; want ant-bx alone with its one event", page.Execution.Bound, len(page.Events))
	}

	// A token acting for both agents names the agent when the plan id is
	// both agents'; agent_id selects the reading too.
	problem(t, e.must(400, e.call("GET", "/v1/executions/plan-x/events", nil)))
	e.must(200, e.call("GET", "/v1/executions/plan-x/events?agent_id=agent-a", nil)).json(t, &page)
	if strings.Join(page.Execution.Bound, ",") != "ant-ax" {
		t.Fatalf("agent_id=agent-a reads %v", page.Execution.Bound)
	}

	// Anticipation ids are per agent too: B declaring A's ids (one sealed,
	// one not) learns nothing and blocks nothing, and an id B declared
	// first is still A's to declare, read and change.
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-a", "agent-b", "plan-b1", "scope-b"), tenantB))
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-a2", "agent-b", "plan-b2", "scope-b"), tenantB))
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-future", "agent-b", "plan-b3", "scope-b"), tenantB))
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-future", "agent-a", "plan-a3", scope), tenantA))
	e.must(200, e.call("PUT", "/v1/anticipations/ant-future", tenantAnticipation(t, "ant-future", "agent-a", "plan-a4", scope), tenantA))
	var mine struct {
		Anticipation map[string]any
		Sealed       bool
	}
	e.must(200, e.call("GET", "/v1/anticipations/ant-future", nil, tenantA)).json(t, &mine)
	if mine.Anticipation["agent_id"] != "agent-a" || mine.Anticipation["plan_id"] != "plan-a4" {
		t.Fatalf("A reads %v", mine.Anticipation)
	}
	e.must(200, e.call("GET", "/v1/anticipations/ant-a", nil, tenantA)).json(t, &mine)
	if !mine.Sealed || mine.Anticipation["agent_id"] != "agent-a" {
		t.Fatalf("A's sealed ant-a reads %+v", mine)
	}
	// A token acting for both names the agent when both declared the id.
	problem(t, e.must(400, e.call("GET", "/v1/anticipations/ant-future", nil)))
	e.must(200, e.call("GET", "/v1/anticipations/ant-future?agent_id=agent-b", nil)).json(t, &mine)
	if mine.Anticipation["agent_id"] != "agent-b" {
		t.Fatalf("agent_id=agent-b reads %v", mine.Anticipation)
	}

	// The same anticipation id on the same plan id, and on the same scope,
	// by both: two plans, each sealing and grading its own agent's
	// declaration, with a VERIFY each.
	for _, bound := range []struct{ ant, plan, scope, run string }{{"ant-same", "plan-same", "scope-x", "plan-same"}, {"ant-same-scope", "", "scope-same", "plan-by-scope"}} {
		e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, bound.ant, "agent-a", bound.plan, bound.scope), tenantA))
		e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, bound.ant, "agent-b", bound.plan, bound.scope), tenantB))
		vids := map[string]bool{}
		for _, tn := range []struct{ token, agent string }{{tenantA, "agent-a"}, {tenantB, "agent-b"}} {
			e.must(202, e.call("POST", "/v1/executions/"+bound.run+"/events", event(bound.run+"-1", "STEP_COMPLETE", "scope_envelope_id", bound.scope), tn.token))
			e.must(202, e.call("POST", "/v1/executions/"+bound.run+"/events", event(bound.run+"-2", "PLAN_COMPLETE"), tn.token))
			v := waitVerificationAs(t, e, bound.ant, tn.token)
			if v.AgentID != tn.agent || vids[v.VerificationID] {
				t.Fatalf("%s's VERIFY of %s: %+v (ids so far %v)", tn.agent, bound.ant, v, vids)
			}
			vids[v.VerificationID] = true
		}
	}

	// Another tenant's anticipation ids answer as unknown ones.
	sameAsUnknown(t, e.call("GET", "/v1/anticipations/ant-ax", nil, tenantB), e.call("GET", "/v1/anticipations/ant-zz", nil, tenantB), "ant-ax", "ant-zz")
	sameAsUnknown(t, e.call("GET", "/v1/anticipations/ant-ax/verifications", nil, tenantB), e.call("GET", "/v1/anticipations/ant-zz/verifications", nil, tenantB), "ant-ax", "ant-zz")
	sameAsUnknown(t, e.call("PUT", "/v1/anticipations/ant-ax", tenantAnticipation(t, "ant-ax", "agent-b", "", scope), tenantB),
		e.call("PUT", "/v1/anticipations/ant-zz", tenantAnticipation(t, "ant-zz", "agent-b", "", scope), tenantB), "ant-ax", "ant-zz")
}

// waitVerificationAs waits for the VERIFY of antID, read with token.
func waitVerificationAs(t *testing.T, e *testEnv, antID, token string) anticipate.Verification {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out struct{ Verifications []anticipate.Verification }
		e.must(200, e.call("GET", "/v1/anticipations/"+antID+"/verifications", nil, token)).json(t, &out)
		if len(out.Verifications) == 1 {
			return out.Verifications[0]
		}
		if time.Now().After(deadline) {
			e.explainNoVerify(antID, token)
			t.Fatalf("no VERIFY of %s", antID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scenarioTenantsEdgeRefusals: through the whole runtime (the embedded
// default, and API Gateway's Lambda proxy on AWS): a browser Origin not
// allowed at /mcp is refused; invalid UTF-8 in a factKey is a 400 naming
// it and stores nothing; a card with url and URL is refused; and a lapse
// to an agent whose endpoint redirects to another origin carries its
// stored bearer token nowhere but is dead-lettered saying why (issue 27,
// findings 2, 5, 7 and 8).
func scenarioTenantsEdgeRefusals(t *testing.T) {
	e := startEnv(t)
	list, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	req := e.request("POST", "/mcp", list)
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Origin", "http://evil.example")
	problem(t, e.must(403, e.do(req)))
	req = e.request("POST", "/mcp", list)
	req.Header.Set("Accept", "application/json, text/event-stream")
	e.must(200, e.do(req))

	ag := a2atest.NewAgent(t, "1.0")
	token := "bearer-" + randomSecret(t)
	ag.Require(a2atest.Bearer("bearer", func(tok string) bool { return tok == token }))
	card := ag.Card()
	shadowed := strings.Replace(string(card), `"url":"`+ag.URL()+`"`, `"url":"`+ag.URL()+`","URL":"https://elsewhere.example/a2a"`, 1)
	if shadowed == string(card) {
		t.Fatal("the agent's card has no url to shadow")
	}
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agentID, []byte(shadowed))), "supportedInterfaces[0].URL")

	// The agent's endpoint redirects to another origin that records
	// whatever reaches it.
	var mu sync.Mutex
	var seen []string
	away := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer away.Close()
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, strings.Replace(away.URL, "127.0.0.1", "localhost", 1)+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	e.must(200, e.call("PUT", "/v1/agents/"+agentID, []byte(strings.ReplaceAll(string(card), ag.URL(), redirect.URL+"/a2a"))))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/credentials", map[string]any{"credentials": map[string]any{"bearer": map[string]any{"token": token}}}))

	bad := []byte(strings.Replace(string(mustMarshal(t, raiseBody(payment("u8", ts(time.Hour))))), "invoice.42.u8", "invoice.42.\xff", 1))
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", bad)), "expectations[0].satisfiedBy.factKey")
	e.must(404, e.call("GET", "/v1/agents/"+agentID+"/expectations/u8", nil))

	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("redirected", ts(100*time.Millisecond)))))
	dead := e.waitRecord(agentID, "redirected", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeadLettered })
	if dead.Delivery.Attempts != 1 || !strings.Contains(dead.Delivery.LastError, "redirect to another origin refused") {
		t.Fatalf("dead letter: %+v", dead.Delivery)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 0 {
		t.Fatalf("the other origin received %d requests (%q)", len(seen), seen)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
