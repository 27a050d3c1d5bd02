package app

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"
)

// tenant is one side of TestTenancyProperty: a token bound to one agent,
// and the marker every message it sends carries (session_id, event ids),
// which no answer to the other tenant may ever contain.
type tenant struct {
	token, agent, marker string
}

var tenancyRun atomic.Int64

// TestTenancyProperty drives two tenants through random interleavings of
// the evaluation routes over a small shared pool of anticipation ids, plan
// ids and scope envelopes: declarations by plan and by scope, changes,
// events with and without agent_id, through REST and the MCP tool, and
// every read. Whatever the order, no answer is a 5xx; no answer to one
// tenant holds anything the other sent; every execution binds only its own
// agent's declarations; a plan a tenant declared for is never unknown to
// its events; and every anticipation, execution and VERIFY a tenant reads
// is its own agent's. Run longer with -rapid.checks=N.
func TestTenancyProperty(t *testing.T) {
	e := startEnv(t)
	a := tenant{tenantA, "agent-a", "marker-of-a"}
	b := tenant{tenantB, "agent-b", "marker-of-b"}
	rapid.Check(t, func(rt *rapid.T) {
		pfx := fmt.Sprintf("r%d", tenancyRun.Add(1))
		antID := func(i int) string { return fmt.Sprintf("ant-%s-%d", pfx, i) }
		planID := func(i int) string { return fmt.Sprintf("plan-%s-%d", pfx, i) }
		scopeID := func(i int) string { return fmt.Sprintf("scope-%s-%d", pfx, i) }
		seq := 0
		// binds[agent][anticipation id] is where each accepted declaration
		// binds: "plan:<id>" or "scope:<id>".
		binds := map[string]map[string]string{a.agent: {}, b.agent: {}}
		check := func(who, other tenant, what string, r resp) {
			if r.status >= 500 {
				rt.Fatalf("%s by %s: %d %s", what, who.agent, r.status, r.body)
			}
			if strings.Contains(string(r.body), other.marker) {
				rt.Fatalf("%s by %s shows what %s sent: %s", what, who.agent, other.agent, r.body)
			}
		}
		steps := rapid.IntRange(10, 40).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			who, other := a, b
			if rapid.Bool().Draw(rt, "tenantB") {
				who, other = b, a
			}
			ant := antID(rapid.IntRange(0, 2).Draw(rt, "ant"))
			// Few plans and one scope envelope for both: the interleavings
			// where one tenant's declarations could meet the other's plan
			// are the common case, not a rare one.
			plan := planID(rapid.IntRange(0, 1).Draw(rt, "plan"))
			scope := scopeID(0)
			switch op := rapid.IntRange(0, 6).Draw(rt, "op"); op {
			case 0, 1: // declare, by plan or by scope; or change
				bound := plan
				if op == 1 {
					bound = ""
				}
				body := variant(&testing.T{}, ant, bound, func(m map[string]any) {
					m["agent_id"], m["scope_envelope_id"], m["session_id"] = who.agent, scope, "ses-"+who.marker
					if bound == "" {
						delete(m, "plan_id")
					}
				})
				method, path := "POST", "/v1/anticipations"
				if rapid.Bool().Draw(rt, "put") {
					method, path = "PUT", "/v1/anticipations/"+ant
				}
				r := e.call(method, path, body, who.token)
				check(who, other, method+" "+ant, r)
				if r.status == 200 || r.status == 201 {
					binds[who.agent][ant] = "scope:" + scope
					if bound != "" {
						binds[who.agent][ant] = "plan:" + bound
					}
				}
			case 2, 3: // an event, with or without agent_id and scope, by REST or MCP
				seq++
				typ := rapid.SampledFrom([]string{"TOOL_REQUEST", "STEP_COMPLETE", "PLAN_COMPLETE"}).Draw(rt, "type")
				fields := []any{}
				if typ == "TOOL_REQUEST" {
					fields = append(fields, "tool", "t", "arguments", map[string]any{"by": who.marker})
				}
				if rapid.Bool().Draw(rt, "withAgent") {
					fields = append(fields, "agent_id", who.agent)
				}
				if rapid.IntRange(0, 3).Draw(rt, "withScope") > 0 {
					fields = append(fields, "scope_envelope_id", scope)
				}
				ev := event(fmt.Sprintf("ev-%s-%d", who.marker, seq), typ, fields...)
				// A plan the tenant declared for (by plan, or by the
				// scope the event names) is never unknown to it, whatever
				// the other tenant declared.
				_, withScope := ev["scope_envelope_id"]
				declared := false
				for _, where := range binds[who.agent] {
					declared = declared || where == "plan:"+plan || (withScope && where == "scope:"+scope)
				}
				if op == 3 {
					raw, _ := json.Marshal(ev)
					call := map[string]any{"jsonrpc": "2.0", "id": seq, "method": "tools/call", "params": map[string]any{
						"name": "append_execution_event", "arguments": map[string]any{"planId": plan, "event": json.RawMessage(raw)}}}
					r := e.mcpCall(call, who.token)
					check(who, other, "MCP event on "+plan, r)
					if declared && strings.Contains(string(r.body), `\"status\":404`) {
						rt.Fatalf("%s's event on its declared plan %s is unknown: %s", who.agent, plan, r.body)
					}
				} else {
					r := e.call("POST", "/v1/executions/"+plan+"/events", ev, who.token)
					check(who, other, "event on "+plan, r)
					if declared && r.status == 404 {
						rt.Fatalf("%s's event on its declared plan %s is unknown: %s", who.agent, plan, r.body)
					}
				}
			case 4: // read a plan
				r := e.call("GET", "/v1/executions/"+plan+"/events", nil, who.token)
				check(who, other, "events of "+plan, r)
				if r.status == 200 {
					var page struct {
						Execution struct {
							AgentID string   `json:"agent_id"`
							Bound   []string `json:"bound"`
						} `json:"execution"`
					}
					r.json(&testing.T{}, &page)
					if page.Execution.AgentID != who.agent {
						rt.Fatalf("%s reads the execution of %s of %s", who.agent, plan, page.Execution.AgentID)
					}
					for _, id := range page.Execution.Bound {
						var got struct{ Anticipation map[string]any }
						e.must(200, e.call("GET", "/v1/anticipations/"+id+"?agent_id="+who.agent, nil)).json(&testing.T{}, &got)
						if got.Anticipation["agent_id"] != who.agent {
							rt.Fatalf("%s's plan %s binds %s of %v", who.agent, plan, id, got.Anticipation["agent_id"])
						}
					}
				}
			case 5: // read an anticipation
				r := e.call("GET", "/v1/anticipations/"+ant, nil, who.token)
				check(who, other, "anticipation "+ant, r)
				var got struct{ Anticipation map[string]any }
				if r.status == 200 {
					r.json(&testing.T{}, &got)
					if got.Anticipation["agent_id"] != who.agent {
						rt.Fatalf("%s reads %s of %v", who.agent, ant, got.Anticipation["agent_id"])
					}
				}
			case 6: // its VERIFYs
				r := e.call("GET", "/v1/anticipations/"+ant+"/verifications", nil, who.token)
				check(who, other, "verifications of "+ant, r)
				if r.status == 200 {
					var out struct {
						Verifications []struct {
							AgentID string `json:"agent_id"`
						}
					}
					r.json(&testing.T{}, &out)
					for _, v := range out.Verifications {
						if v.AgentID != who.agent {
							rt.Fatalf("%s reads a VERIFY of %s", who.agent, v.AgentID)
						}
					}
				}
			}
		}
	})
}

// mcpCall posts one JSON-RPC message to /mcp with token, as a Streamable
// HTTP client does.
func (e *testEnv) mcpCall(msg any, token string) resp {
	b, _ := json.Marshal(msg)
	req := e.request("POST", "/mcp", b)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json, text/event-stream")
	return e.do(req)
}
