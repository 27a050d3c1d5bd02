package app

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// scenarioAgentErasure: DELETE /v1/agents/{id} leaves nothing of the agent
// that a route shows; a lapse due after it is never sent; a fact
// satisfies nothing; with evidence=true the agent's ANTICIPATEs, events
// and VERIFYs go too; a second erasure is a 404; another tenant cannot.
func scenarioAgentErasure(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	// e-open is due well after the erasure, even on a loaded machine (the
	// steps before it take a few seconds).
	openDue := time.Now().Add(10 * time.Second)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("e-done", ts(100*time.Millisecond)), payment("e-open", expect.FormatTime(openDue)))))
	e.waitRecord(agentID, "e-done", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	if n := len(ag.Received()); n != 1 {
		t.Fatalf("lapse tasks before the erasure: %d", n)
	}
	e.must(201, e.call("PUT", "/v1/channels/erase-hook", map[string]any{"type": "webhook", "url": "https://127.0.0.1:9/hook"}))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"erase-hook"}}}}))

	// Evidence of another agent (the seed's), run to its VERIFY.
	var seed map[string]any
	_ = json.Unmarshal(variant(t, "x", "x"), &seed)
	seedAgent := seed["agent_id"].(string)
	registerAs(t, e, seedAgent)
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-erase", "plan-erase")))
	runPlan(t, e, "plan-erase", 3, nil, allGood())
	v := e.waitVerification("ant-erase")

	e.must(403, e.call("DELETE", "/v1/agents/"+agentID, nil, tenantB))
	var out struct {
		Erased   map[string]int
		Evidence string
	}
	e.must(200, e.call("DELETE", "/v1/agents/"+agentID, nil)).json(t, &out)
	if out.Erased["card"] != 1 || out.Erased["expectation"] != 2 || out.Erased["alertrules"] != 1 || !strings.HasPrefix(out.Evidence, "kept") {
		t.Fatalf("erased %+v", out)
	}
	e.must(404, e.call("GET", "/v1/agents/"+agentID, nil))
	e.must(404, e.call("GET", "/v1/agents/"+agentID+"/expectations/e-open", nil))
	if r := e.must(200, e.call("GET", "/v1/agents/"+agentID+"/alerts", nil)); !strings.Contains(string(r.body), `"rules":[]`) {
		t.Fatalf("alert rules after the erasure: %s", r.body)
	}
	if r := e.must(200, e.call("GET", "/v1/agents/"+agentID+"/notifications?expectationId=e-done", nil)); strings.Contains(string(r.body), "ntf_") {
		t.Fatalf("notifications after the erasure: %s", r.body)
	}
	var agents struct{ Agents []map[string]any }
	e.must(200, e.call("GET", "/v1/agents", nil)).json(t, &agents)
	for _, a := range agents.Agents {
		if a["agentId"] == agentID {
			t.Fatal("the erased agent is still listed")
		}
	}
	if r := e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.e-open", ts(0))}}); r.status == 200 &&
		strings.Contains(string(r.body), "e-open") {
		t.Fatalf("a fact satisfied an erased expectation: %s", r.body)
	}
	if time.Now().After(openDue) {
		t.Fatalf("the erasure came after e-open's due time: the scenario needs a longer lead")
	}
	time.Sleep(time.Until(openDue) + time.Second) // e-open's due time passes
	if n := len(ag.Received()); n != 1 {
		t.Fatalf("a lapse task was sent for an erased expectation: %d received", n)
	}
	e.must(404, e.call("DELETE", "/v1/agents/"+agentID, nil))

	// Evidence.
	e.must(200, e.call("DELETE", "/v1/agents/"+seedAgent+"?evidence=true", nil)).json(t, &out)
	if out.Evidence != "erased" || out.Erased["anticipation"] != 1 || out.Erased["verification"] < 1 || out.Erased["event"] < 1 {
		t.Fatalf("evidence erased %+v", out)
	}
	e.must(404, e.call("GET", "/v1/anticipations/ant-erase", nil))
	e.must(404, e.call("GET", "/v1/verifications/"+v.VerificationID, nil))
	e.must(404, e.call("GET", "/v1/verifications/"+v.VerificationID+"/bundle", nil))
	e.must(404, e.call("GET", "/v1/executions/plan-erase/events", nil))
	hasErrorPath(t, e.must(400, e.call("DELETE", "/v1/agents/"+seedAgent+"?evidence=yes", nil)), "evidence")
}

// scenarioErasureTenancy: an agent's evidence erasure removes its
// executions bound by scope envelope too, and leaves another tenant's
// VERIFY graded against an anticipation of the same id (ids are per
// agent). Both were found by a second tenant's probe.
func scenarioErasureTenancy(t *testing.T) {
	e := startEnv(t)
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-shared", "agent-a", "plan-a", "scope-a"), tenantA))
	e.must(202, e.call("POST", "/v1/executions/plan-a/events", event("a-1", "STEP_COMPLETE"), tenantA))
	e.must(202, e.call("POST", "/v1/executions/plan-a/events", event("a-2", "PLAN_COMPLETE"), tenantA))
	va := waitVerificationAs(t, e, "ant-shared", tenantA)

	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-shared", "agent-b", "plan-b", "scope-b"), tenantB))
	e.must(201, e.call("POST", "/v1/anticipations", tenantAnticipation(t, "ant-scope", "agent-b", "", "scope-s"), tenantB))
	e.must(202, e.call("POST", "/v1/executions/plan-s/events", event("s-1", "STEP_COMPLETE", "scope_envelope_id", "scope-s"), tenantB))
	e.must(202, e.call("POST", "/v1/executions/plan-s/events", event("s-2", "PLAN_COMPLETE"), tenantB))
	vb := waitVerificationAs(t, e, "ant-scope", tenantB)

	e.must(200, e.call("DELETE", "/v1/agents/agent-b?evidence=true", nil, tenantB))
	e.must(200, e.call("GET", "/v1/verifications/"+va.VerificationID, nil, tenantA))
	e.must(200, e.call("GET", "/v1/executions/plan-a/events", nil, tenantA))
	e.must(404, e.call("GET", "/v1/verifications/"+vb.VerificationID, nil, tenantB))
	e.must(404, e.call("GET", "/v1/executions/plan-s/events", nil, tenantB))
	e.must(404, e.call("GET", "/v1/anticipations/ant-scope", nil, tenantB))

	// A tenant's channels go with the last of its agents; A's and the
	// operator's stay.
	e.must(201, e.call("PUT", "/v1/channels/b-hook", map[string]any{"type": "webhook", "url": "https://127.0.0.1:9/b"}, tenantB))
	e.must(201, e.call("PUT", "/v1/channels/a-hook", map[string]any{"type": "webhook", "url": "https://127.0.0.1:9/a"}, tenantA))
	e.must(201, e.call("PUT", "/v1/channels/ops-hook", map[string]any{"type": "webhook", "url": "https://127.0.0.1:9/ops"}))
	e.must(200, e.call("PUT", "/v1/agents/agent-b", a2atestCard(t), tenantB))
	// The erasure finds the channels by their listing, a global index on
	// DynamoDB that may lag a channel just made by a moment.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var list struct{ Channels []map[string]any }
		e.must(200, e.call("GET", "/v1/channels", nil, tenantB)).json(t, &list)
		if slices.ContainsFunc(list.Channels, func(c map[string]any) bool { return c["channelId"] == "b-hook" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's channel is never listed")
		}
	}
	var out struct{ Erased map[string]int }
	e.must(200, e.call("DELETE", "/v1/agents/agent-b", nil, tenantB)).json(t, &out)
	if out.Erased["channel"] != 1 || out.Erased["card"] != 1 {
		t.Fatalf("erased %v; want the card and B's one channel", out.Erased)
	}
	e.must(404, e.call("GET", "/v1/channels/b-hook", nil))
	e.must(200, e.call("GET", "/v1/channels/a-hook", nil, tenantA))
	e.must(200, e.call("GET", "/v1/channels/ops-hook", nil))
}
