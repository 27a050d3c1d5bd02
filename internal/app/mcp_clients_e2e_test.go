package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/httpapi"
)

// mcpClientsDir holds the official MCP clients' scripts and pins.
const mcpClientsDir = "../mcpapi/testdata/clients"

// mcpClient is one official MCP SDK's client: the command that runs its
// script (reading a plan on stdin, printing a report).
type mcpClient struct {
	name string
	cmd  func(t *testing.T) []string
}

// mcpClients are the official TypeScript and Python SDKs' clients,
// installed into caches by their scripts (npm.sh, venv.sh) on first use.
// Unavailable, the test is skipped, and fails under CI=true.
var mcpClients = []mcpClient{
	{"typescript", func(t *testing.T) []string {
		out := installTool(t, "bash", mcpClientsDir+"/npm.sh", "paths")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("npm.sh printed %q", out)
		}
		return []string{lines[0], mcpClientsDir + "/client.mjs", lines[1]}
	}},
	{"python", func(t *testing.T) []string {
		return []string{strings.TrimSpace(installTool(t, "bash", mcpClientsDir+"/venv.sh", "python")), mcpClientsDir + "/client.py"}
	}},
}

func installTool(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		switch strings.ToLower(os.Getenv("CI")) {
		case "true", "1", "yes":
			t.Fatalf("%v unavailable (CI=true, so this fails instead of skipping): %v: %s", args, err, stderr.String())
		}
		t.Skipf("%v unavailable: %v: %s", args, err, stderr.String())
	}
	return string(out)
}

type clientCall struct {
	Tool      string `json:"tool"`
	Arguments any    `json:"arguments"`
	// invalid names the field the tool error must name ("" for a valid call).
	invalid string
}

type clientReport struct {
	ProtocolVersion string   `json:"protocolVersion"`
	Tools           []string `json:"tools"`
	Results         []struct {
		Tool       string          `json:"tool"`
		IsError    bool            `json:"isError"`
		Structured json.RawMessage `json:"structured"`
		Text       string          `json:"text"`
		Error      string          `json:"error"`
	} `json:"results"`
}

// scenarioMCPOfficialClients: the official MCP clients, the TypeScript SDK's
// (what Claude Code, Claude Desktop, VS Code and Cursor build on) and the
// Python SDK's, each as a host connects (Streamable HTTP, the bearer token
// in a header): initialize, list the tools (both SDKs validate every tool's
// schemas and refuse the whole list otherwise), call every tool once with
// valid arguments (both validate the structured result against the tool's
// output schema) and once with invalid ones (a tool error naming the
// field, not a protocol error).
func scenarioMCPOfficialClients(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	want := []string{"append_execution_event", "declare_anticipation", "fail_heartbeat", "get_evaluation", "get_expectation", "get_heartbeat", "list_expectations", "list_heartbeats",
		"list_review_items", "ping_heartbeat", "put_evaluator", "put_heartbeat", "raise_expectations", "report_facts", "start_evaluation", "submit_review", "withdraw_expectations"}
	// A review queue whose one reviewer is the clients' principal, and
	// an item in it for each client: agent-a's plans, declared by its own
	// token (a principal never reviews what it declared).
	e.must(201, e.call("PUT", "/v1/review-queues/mcp-reviews", map[string]any{"reviewers": []string{"admin"}, "reviewsPerItem": 1}))
	items := map[string]string{}
	for _, c := range mcpClients {
		plan := "plan-rv-" + c.name
		body := variant(t, "ant-rv-"+c.name, plan, func(m map[string]any) {
			m["agent_id"] = "agent-a"
			m["grading_policy"] = map[string]any{"grader_type": "HUMAN", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": false}
			m["expectations"] = map[string]any{"outcome_criteria": []any{map[string]any{"criterion_id": "tone", "description": "The reply is polite",
				"measurement": "HUMAN", "assertion": "A reviewer finds the reply polite", "weight": 1, "queue": "mcp-reviews"}}}
		})
		e.must(201, e.call("POST", "/v1/anticipations", body, tenantA))
		runPlan(t, e, plan, 1, nil, allGood())
	}
	for deadline := time.Now().Add(30 * time.Second); len(items) < len(mcpClients); time.Sleep(50 * time.Millisecond) {
		var page struct {
			Items []struct{ ItemID, PlanID string }
		}
		e.must(200, e.call("GET", "/v1/review-queues/mcp-reviews/items?assignee=me", nil)).json(t, &page)
		for _, it := range page.Items {
			items[strings.TrimPrefix(it.PlanID, "plan-rv-")] = it.ItemID
		}
		if time.Now().After(deadline) {
			t.Fatalf("review items %v", items)
		}
	}
	// An evaluation for the clients to read (the agent has no completed
	// plan, so it is done at once).
	evalCriteria := []any{map[string]any{"criterion_id": "few", "description": "few steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 3", "weight": 1}}
	evalPolicy := map[string]any{"grader_type": "CODE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": true}
	var started struct{ EvaluationID string }
	e.must(202, e.call("POST", "/v1/evaluations", map[string]any{"filter": map[string]any{"agentId": agentID}, "criteria": evalCriteria, "gradingPolicy": evalPolicy})).json(t, &started)
	for _, c := range mcpClients {
		t.Run(c.name, func(t *testing.T) {
			cmd := c.cmd(t)
			p := c.name // ids apart per client
			calls := []clientCall{
				{Tool: "raise_expectations", Arguments: map[string]any{"agentId": agentID, "taskId": "task-" + p, "contextId": "ctx-" + p,
					"expectations": []any{payment(p+"-1", ts(time.Hour)), payment(p+"-2", ts(time.Hour))}}},
				{Tool: "raise_expectations", Arguments: map[string]any{"agentId": agentID, "taskId": "task-" + p, "contextId": "ctx-" + p,
					"expectations": []any{payment(p+"-bad", "next tuesday")}}, invalid: "expectations[0].dueAt"},
				{Tool: "get_expectation", Arguments: map[string]any{"agentId": agentID, "expectationId": p + "-1"}},
				{Tool: "get_expectation", Arguments: map[string]any{"agentId": agentID, "expectationId": p + "-1", "extra": true}, invalid: "extra"},
				{Tool: "list_expectations", Arguments: map[string]any{"agentId": agentID, "state": "open"}},
				{Tool: "list_expectations", Arguments: map[string]any{"agentId": agentID, "limit": 100000}, invalid: "limit"},
				{Tool: "report_facts", Arguments: map[string]any{"agentId": agentID, "facts": []any{map[string]any{"factKey": "invoice.42." + p + "-1", "observedAt": ts(0)}}}},
				{Tool: "report_facts", Arguments: map[string]any{"agentId": agentID, "facts": []any{map[string]any{"factKey": "k", "observedAt": "yesterday"}}}, invalid: "facts[0].observedAt"},
				{Tool: "withdraw_expectations", Arguments: map[string]any{"agentId": agentID, "withdraw": []string{p + "-2"}, "reason": "plan changed"}},
				{Tool: "withdraw_expectations", Arguments: map[string]any{"agentId": agentID, "withdraw": "all"}, invalid: "withdraw"},
				{Tool: "put_heartbeat", Arguments: map[string]any{"agentId": agentID, "name": "hb-" + p, "kind": "payment", "cron": "0 2 * * *", "timezone": "Europe/Riga"}},
				{Tool: "put_heartbeat", Arguments: map[string]any{"agentId": agentID, "name": "hb-" + p, "kind": "payment", "every": "5 minutes"}, invalid: "every"},
				{Tool: "ping_heartbeat", Arguments: map[string]any{"agentId": agentID, "name": "hb-" + p}},
				{Tool: "get_heartbeat", Arguments: map[string]any{"agentId": agentID, "name": "hb-" + p}},
				{Tool: "list_heartbeats", Arguments: map[string]any{"agentId": agentID}},
				{Tool: "fail_heartbeat", Arguments: map[string]any{"agentId": agentID, "name": "hb-" + p}},
				{Tool: "declare_anticipation", Arguments: json.RawMessage(variant(t, "ant-"+p, "plan-"+p))},
				{Tool: "declare_anticipation", Arguments: json.RawMessage(variant(t, "ant-"+p+"-bad", "plan-"+p+"-bad", func(m map[string]any) {
					m["expectations"].(map[string]any)["outcome_criteria"].([]any)[0].(map[string]any)["weight"] = 1.5
				})), invalid: "expectations.outcome_criteria[0].weight"},
				{Tool: "append_execution_event", Arguments: map[string]any{"planId": "plan-" + p, "event": event(p+"-ev", "STEP_COMPLETE")}},
				{Tool: "append_execution_event", Arguments: map[string]any{"planId": "plan-" + p, "event": map[string]any{"event_id": "x", "message_type": "DANCE", "timestamp": ts(0)}}, invalid: "event.message_type"},
				{Tool: "start_evaluation", Arguments: map[string]any{"filter": map[string]any{"agentId": agentID}, "criteria": evalCriteria, "gradingPolicy": evalPolicy}},
				{Tool: "start_evaluation", Arguments: map[string]any{"filter": map[string]any{"agentId": agentID, "from": "last week"}, "criteria": evalCriteria}, invalid: "filter.from"},
				{Tool: "get_evaluation", Arguments: map[string]any{"evaluationId": started.EvaluationID}},
				{Tool: "put_evaluator", Arguments: map[string]any{"agentId": agentID, "name": "sample-" + p, "criteria": evalCriteria, "sample": 0.1}},
				{Tool: "put_evaluator", Arguments: map[string]any{"agentId": agentID, "name": "sample-" + p, "criteria": evalCriteria, "sample": 2}, invalid: "sample"},
				{Tool: "list_review_items", Arguments: map[string]any{"queueId": "mcp-reviews", "assignee": "me", "state": "open"}},
				{Tool: "list_review_items", Arguments: map[string]any{"queueId": "mcp-reviews", "state": "closed"}, invalid: "state"},
				{Tool: "submit_review", Arguments: map[string]any{"queueId": "mcp-reviews", "itemId": items[c.name], "criterionId": "tone", "grade": "maybe"}, invalid: "grade"},
				{Tool: "submit_review", Arguments: map[string]any{"queueId": "mcp-reviews", "itemId": items[c.name], "criterionId": "tone", "grade": 0.8, "comment": "polite"}},
			}
			plan, _ := json.Marshal(map[string]any{"url": e.srv.URL + "/mcp", "token": adminToken, "calls": calls})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
			run.Stdin = bytes.NewReader(plan)
			var stderr bytes.Buffer
			run.Stderr = &stderr
			out, err := run.Output()
			if err != nil {
				t.Fatalf("%s client: %v\n%s", c.name, err, stderr.String())
			}
			var rep clientReport
			if err := json.Unmarshal(out, &rep); err != nil {
				t.Fatalf("report %s: %v", out, err)
			}
			t.Logf("%s client negotiated MCP %s", c.name, rep.ProtocolVersion)
			listed := slices.Sorted(slices.Values(rep.Tools))
			if strings.Join(listed, ",") != strings.Join(want, ",") {
				t.Fatalf("tools listed %v, want %v", rep.Tools, want)
			}
			covered := map[string]bool{}
			for i, r := range rep.Results {
				call := calls[i]
				if r.Error != "" {
					t.Errorf("%s (%s): the SDK raised: %s", call.Tool, pickStr(call.invalid == "", "valid", "invalid"), r.Error)
					continue
				}
				if call.invalid == "" {
					covered[call.Tool] = true
					if r.IsError || !bytes.HasPrefix(bytes.TrimSpace(r.Structured), []byte("{")) {
						t.Errorf("%s: isError %v, structured %s, text %s", call.Tool, r.IsError, r.Structured, r.Text)
					}
					continue
				}
				var prob httpapi.Problem
				if !r.IsError || json.Unmarshal([]byte(r.Text), &prob) != nil || prob.Status != 400 || !problemNames(prob, call.invalid) {
					t.Errorf("%s with invalid arguments: isError %v, %s; want a 400 naming %s", call.Tool, r.IsError, r.Text, call.invalid)
				}
			}
			for _, name := range want {
				if !covered[name] {
					t.Errorf("tool %s was not called successfully", name)
				}
			}
		})
	}
}

// scenarioMCPHostConfigs: each MCP host configuration the README shows
// (docs/mcp-hosts: Claude Code, VS Code, Cursor, and Claude Desktop through
// the mcp-remote bridge) connects with the official TypeScript SDK client
// the way that host does, with the configured headers or command, lists
// the tools and calls one.
func scenarioMCPHostConfigs(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	cmd := mcpClients[0].cmd(t) // node, client.mjs, node_modules
	for host, file := range map[string]string{"claude-code": "claude-code.mcp.json", "vscode": "vscode.mcp.json", "cursor": "cursor.mcp.json", "claude-desktop": "claude_desktop_config.json"} {
		t.Run(host, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run := exec.CommandContext(ctx, cmd[0], mcpClientsDir+"/host.mjs", cmd[2], host, "../../docs/mcp-hosts/"+file, e.srv.URL+"/mcp", adminToken)
			var stderr bytes.Buffer
			run.Stderr = &stderr
			out, err := run.Output()
			if err != nil {
				t.Fatalf("%s: %v\n%s", host, err, stderr.String())
			}
			var rep struct {
				Tools  []string        `json:"tools"`
				Listed json.RawMessage `json:"listed"`
			}
			if err := json.Unmarshal(out, &rep); err != nil || len(rep.Tools) != 17 || !bytes.Contains(rep.Listed, []byte(`"records"`)) {
				t.Fatalf("%s: %s (%v)", host, out, err)
			}
		})
	}
}

func pickStr(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}
