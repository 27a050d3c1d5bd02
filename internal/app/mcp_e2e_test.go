package app

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/httpapi"
)

// bearerTransport adds the bearer token to every request of an MCP client,
// as an MCP host configured with an Authorization header does.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// mcpConnect connects the MCP SDK's own client to the environment's /mcp
// with token ("" sends none).
func (e *testEnv) mcpConnect(token string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "clockwork-e2e", Version: "v0"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   e.srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: token, base: http.DefaultTransport}, Timeout: 30 * time.Second},
		MaxRetries: -1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, tr, nil)
	if err == nil {
		e.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// mcpCall calls a tool and decodes its structured result into out (when
// not nil); a tool error fails the test with its problem.
func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args any, out any) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		t.Fatalf("%s: tool error %s", name, toolText(res))
	}
	if out != nil {
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", name, b, err)
		}
	}
}

// mcpProblem calls a tool that must fail as a tool error and returns the
// problem details it carries.
func mcpProblem(t *testing.T, cs *mcp.ClientSession, name string, args any) httpapi.Problem {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !res.IsError {
		t.Fatalf("%s: succeeded, want a tool error: %s", name, toolText(res))
	}
	var p httpapi.Problem
	if err := json.Unmarshal([]byte(toolText(res)), &p); err != nil || p.Status == 0 {
		t.Fatalf("%s: tool error is not a problem: %s (%v)", name, toolText(res), err)
	}
	return p
}

func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "")
}

func problemNames(p httpapi.Problem, path string) bool {
	for _, f := range p.Errors {
		if f.Path == path {
			return true
		}
	}
	return false
}

// scenarioMCPTools drives both protocols through the MCP endpoint with the
// MCP Go SDK's own client: an expectation raised through MCP lapses and its
// lapse task reaches the agent; a fact reported through MCP satisfies
// another; records are read and listed; an ANTICIPATE declared and its
// plan's events submitted through MCP are graded; bad arguments are tool
// errors naming the field; tokens without the scope or the agent are
// refused.
func scenarioMCPTools(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	cs, err := e.mcpConnect(adminToken)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"raise_expectations", "report_facts", "withdraw_expectations", "get_expectation", "list_expectations", "declare_anticipation", "append_execution_event",
		"put_heartbeat", "ping_heartbeat", "fail_heartbeat", "get_heartbeat", "list_heartbeats", "start_evaluation", "get_evaluation", "list_review_items", "submit_review", "put_evaluator"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}

	// Raise two: one lapses, one is satisfied by a fact.
	var raised struct{ Records []expect.Record }
	mcpCall(t, cs, "raise_expectations", map[string]any{"agentId": agentID, "taskId": "task-mcp", "contextId": "ctx-mcp",
		"expectations": []any{payment("mcp-late", ts(1500*time.Millisecond)), payment("mcp-kept", ts(time.Hour))}}, &raised)
	if len(raised.Records) != 2 || raised.Records[0].State != expect.StateOpen {
		t.Fatalf("raised: %+v", raised)
	}
	var facts struct {
		Facts []struct {
			FactKey   string
			Satisfied []string
		}
	}
	mcpCall(t, cs, "report_facts", map[string]any{"agentId": agentID, "facts": []any{fact("invoice.42.mcp-kept", ts(0))}}, &facts)
	if len(facts.Facts) != 1 || !slices.Equal(facts.Facts[0].Satisfied, []string{"mcp-kept"}) {
		t.Fatalf("facts: %+v", facts)
	}
	rec := e.waitRecord(agentID, "mcp-late", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	msgs := ag.WaitFor(1, 15*time.Second)
	checkLapseMessage(t, msgs[0], rec, expect.Overdue)
	if msgs[0].ContextID != "ctx-mcp" {
		t.Errorf("lapse task in context %q, want the origin's ctx-mcp", msgs[0].ContextID)
	}
	var got expect.Record
	mcpCall(t, cs, "get_expectation", map[string]any{"agentId": agentID, "expectationId": "mcp-late"}, &got)
	if got.State != expect.StateLapsed || got.Lapse == nil || got.Lapse.Lapse != expect.Overdue || got.LapseTaskID != rec.LapseTaskID {
		t.Fatalf("get_expectation: %+v", got)
	}
	mcpCall(t, cs, "get_expectation", map[string]any{"agentId": agentID, "expectationId": "mcp-kept"}, &got)
	if got.State != expect.StateSatisfied || got.SatisfiedBy == nil || got.SatisfiedBy.Source != "admin" {
		t.Fatalf("the kept one: %+v (the source is the caller, never the body's)", got)
	}
	var listed struct{ Records []expect.Record }
	mcpCall(t, cs, "list_expectations", map[string]any{"agentId": agentID, "state": "lapsed"}, &listed)
	if len(listed.Records) != 1 || listed.Records[0].Expectation.ExpectationID != "mcp-late" {
		t.Fatalf("list lapsed: %+v", listed)
	}
	mcpCall(t, cs, "raise_expectations", map[string]any{"agentId": agentID, "taskId": "task-mcp", "contextId": "ctx-mcp",
		"expectations": []any{payment("mcp-gone", ts(time.Hour))}}, nil)
	var withdrawn struct{ Records []expect.Record }
	mcpCall(t, cs, "withdraw_expectations", map[string]any{"agentId": agentID, "withdraw": []string{"mcp-gone"}, "reason": "plan changed"}, &withdrawn)
	if len(withdrawn.Records) != 1 || withdrawn.Records[0].State != expect.StateWithdrawn {
		t.Fatalf("withdrawn: %+v", withdrawn)
	}

	// Bad arguments: tool errors with the route's problem, naming the field;
	// nothing changes.
	p := mcpProblem(t, cs, "raise_expectations", map[string]any{"agentId": agentID, "taskId": "task-mcp", "contextId": "ctx-mcp",
		"expectations": []any{payment("mcp-bad", "tomorrow")}})
	if p.Status != 400 || !problemNames(p, "expectations[0].dueAt") {
		t.Fatalf("bad dueAt: %+v", p)
	}
	e.must(404, e.call("GET", "/v1/agents/"+agentID+"/expectations/mcp-bad", nil))
	if p := mcpProblem(t, cs, "report_facts", map[string]any{"agentId": agentID, "facts": []any{fact("k", ts(0))}, "extra": 1}); p.Status != 400 || !problemNames(p, "extra") {
		t.Fatalf("unknown member: %+v", p)
	}
	if p := mcpProblem(t, cs, "get_expectation", map[string]any{"agentId": agentID, "expectationId": "never-raised"}); p.Status != 404 {
		t.Fatalf("unknown expectation: %+v", p)
	}

	// The evaluation loop: ANTICIPATE, events, VERIFY.
	var d evaluation.Declared
	mcpCall(t, cs, "declare_anticipation", json.RawMessage(variant(t, "ant-mcp", "plan-mcp")), &d)
	if d.AnticipationID != "ant-mcp" || d.Sealed {
		t.Fatalf("declared: %+v", d)
	}
	seq := 0
	for _, ev := range []evt{
		event("m-req", "TOOL_REQUEST", "tool", "iam_create_user", "arguments", map[string]any{"username": "alice"}),
		event("m-res", "TOOL_RESULT", "tool", "iam_create_user", "status", "SUCCESS"),
		event("m-step", "STEP_COMPLETE"),
		event("m-outcome", "OUTCOME", "variables", map[string]any{"target_username": "alice"}, "observations", allGood()),
		event("m-done", "PLAN_COMPLETE"),
	} {
		var a evaluation.Appended
		mcpCall(t, cs, "append_execution_event", map[string]any{"planId": "plan-mcp", "event": ev}, &a)
		if a.Seq != seq+1 || a.EventID != ev["event_id"] {
			t.Fatalf("appended %+v after seq %d", a, seq)
		}
		seq = a.Seq
	}
	if v := e.waitVerification("ant-mcp"); v.PlanID != "plan-mcp" || v.Verdict == "" {
		t.Fatalf("verification: %+v", v)
	}
	if p := mcpProblem(t, cs, "append_execution_event", map[string]any{"planId": "plan-mcp-2", "event": map[string]any{"event_id": "x", "message_type": "TOOL_REQUEST", "tool": "t"}}); p.Status != 400 || !problemNames(p, "event.timestamp") {
		t.Fatalf("event without timestamp: %+v", p)
	}

	// Refusals, as the routes refuse: no token, a token without the
	// tool's scope (403 with an insufficient_scope challenge, before the
	// tool runs), a token for another agent.
	if _, err := e.mcpConnect(""); err == nil {
		t.Fatal("connected without a token")
	}
	reader, err := e.mcpConnect(readerToken)
	if err != nil {
		t.Fatal(err)
	}
	mcpCall(t, reader, "get_expectation", map[string]any{"agentId": agentID, "expectationId": "mcp-late"}, nil)
	_, err = reader.CallTool(context.Background(), &mcp.CallToolParams{Name: "raise_expectations", Arguments: map[string]any{"agentId": agentID,
		"taskId": "task-mcp", "contextId": "ctx-mcp", "expectations": []any{payment("mcp-reader", ts(time.Hour))}}})
	if err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("raise with a read-only token: %v, want Forbidden (403)", err)
	}
	e.must(404, e.call("GET", "/v1/agents/"+agentID+"/expectations/mcp-reader", nil))
	other, err := e.mcpConnect(otherToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_expectation", Arguments: map[string]any{"agentId": agentID, "expectationId": "mcp-late"}}); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("another agent's token: %v, want Forbidden (403)", err)
	}
}
