package httpapi_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestInvalidUTF8EveryRoute sends text that is not valid UTF-8 in a body
// string, a member name, a path parameter and a query parameter of every
// route that reads one: each is a 400 naming the field, and nothing is
// stored (encoding/json alone would have replaced the bytes with U+FFFD,
// and a fact sending U+FFFD would then have matched).
func TestInvalidUTF8EveryRoute(t *testing.T) {
	ap := startApp(t)
	h := ap.Handler
	seed(t, h)
	bad := "inv\xffoice"
	raise := mustJSON(map[string]any{"taskId": "task-u8", "contextId": "ctx-u8", "expectations": []any{expectationJSON("exp-u8", "invoice.42.paid", "2099-12-01T09:00:00Z")}})
	raiseBad := []byte(strings.Replace(string(raise), "invoice.42.paid", bad+".42.paid", 1))
	for _, c := range []struct {
		name, method, path string
		body               []byte
		field              string
	}{
		{"raise factKey", "POST", "/v1/agents/agent-1/expectations", raiseBad, "expectations[0].satisfiedBy.factKey"},
		{"fact factKey", "POST", "/v1/agents/agent-1/facts", []byte(`{"facts":[{"factKey":"` + bad + `","observedAt":"2026-01-01T00:00:00Z"}]}`), "facts[0].factKey"},
		{"surrogate escape", "POST", "/v1/agents/agent-1/facts", []byte(`{"facts":[{"factKey":"a\ud800b","observedAt":"2026-01-01T00:00:00Z"}]}`), "facts[0].factKey"},
		{"withdraw reason", "POST", "/v1/agents/agent-1/withdrawals", []byte(`{"withdraw":["exp-open"],"reason":"` + bad + `"}`), "reason"},
		{"card", "PUT", "/v1/agents/agent-1", []byte(strings.Replace(string(card()), `"name"`, `"description":"`+bad+`","name"`, 1)), "description"},
		{"grade rationale", "POST", "/v1/verifications/vrf-1/grades", []byte(`{"criterion_id":"hc-1","score":1,"rationale":"` + bad + `"}`), "rationale"},
		{"event", "POST", "/v1/executions/plan-1/events", []byte(`{"event_id":"ev-u8","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:09Z","note":"` + bad + `"}`), "note"},
		{"member name", "POST", "/v1/agents/agent-1/facts", []byte(`{"facts":[{"factKey":"k","observedAt":"2026-01-01T00:00:00Z","x` + "\xff" + `":1}]}`), "facts[0].x\ufffd"},
		{"path parameter", "PUT", "/v1/agents/agent-%ff", card(), "agentId"},
		{"path parameter, read", "GET", "/v1/anticipations/ant-%ff", nil, "id"},
		{"query parameter", "GET", "/v1/agents/agent-1/expectations?subjectId=%ff", nil, "subjectId"},
		{"mcp tool argument", "POST", "/mcp", mustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "report_facts", "arguments": map[string]any{"agentId": "agent-1", "facts": []any{map[string]any{"factKey": "X", "observedAt": "2026-01-01T00:00:00Z"}}}}}), "params.arguments.facts[0].factKey"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := c.body
			if c.path == "/mcp" {
				body = []byte(strings.Replace(string(body), `"factKey":"X"`, `"factKey":"`+bad+`"`, 1))
			}
			a := do(h, c.method, c.path, allToken, body)
			if a.status != 400 {
				t.Fatalf("%d %s", a.status, a.body)
			}
			var p struct {
				Errors []struct{ Path, Message string }
			}
			if err := json.Unmarshal(a.body, &p); err != nil {
				t.Fatalf("%s: %v", a.body, err)
			}
			if len(p.Errors) != 1 || p.Errors[0].Path != c.field || !strings.Contains(p.Errors[0].Message, "UTF-8") {
				t.Fatalf("want an error naming %s: %s", c.field, a.body)
			}
		})
	}
	// Nothing was stored: the raise and the card were refused whole.
	if a := do(h, "GET", "/v1/agents/agent-1/expectations/exp-u8", allToken, nil); a.status != 404 {
		t.Fatalf("refused raise stored: %d %s", a.status, a.body)
	}
	if a := do(h, "GET", "/v1/agents/agent-%ff", allToken, nil); a.status != 400 {
		t.Fatalf("GET of the refused card's agent: %d %s", a.status, a.body)
	}
}

// TestCardCaseVariantKeysRefused: a card holding both "url" and "URL"
// would show one endpoint in the console while the server sends to the
// other (encoding/json matches names regardless of letter case); it is
// refused naming the second.
func TestCardCaseVariantKeysRefused(t *testing.T) {
	ap := startApp(t)
	raw := strings.Replace(string(card()), `"url":"http://127.0.0.1:9/a2a"`, `"url":"http://127.0.0.1:9/a2a","URL":"https://elsewhere.example/a2a"`, 1)
	if raw == string(card()) {
		t.Fatal("the test card changed: no url to shadow")
	}
	a := do(ap.Handler, "PUT", "/v1/agents/agent-1", allToken, []byte(raw))
	if a.status != 400 || !strings.Contains(string(a.body), `"path":"supportedInterfaces[0].URL"`) || !strings.Contains(string(a.body), "letter case") {
		t.Fatalf("%d %s", a.status, a.body)
	}
	if a := do(ap.Handler, "GET", "/v1/agents/agent-1", allToken, nil); a.status != 404 {
		t.Fatalf("refused card stored: %d", a.status)
	}
}
