package httpapi_test

import (
	"net/http"
	"testing"
)

// An /a2a payload that raises and withdraws is refused as a whole when a
// withdrawal would be refused (an unknown expectation: 404; a satisfied one:
// 409): the raise it carries is not committed.
func TestA2AWithdrawalRefusedBeforeRaising(t *testing.T) {
	ap := startApp(t)
	h := ap.Handler
	if a := do(h, "PUT", "/v1/agents/"+agent, allToken, card()); a.status != 200 {
		t.Fatalf("card: %d %s", a.status, a.body)
	}
	if a := do(h, "POST", "/v1/agents/"+agent+"/expectations", allToken, raiseBody("settled")); a.status != 200 {
		t.Fatalf("raise: %d %s", a.status, a.body)
	}
	fact := mustJSON(map[string]any{"facts": []any{map[string]any{"factKey": "invoice.42.paid", "observedAt": "2026-01-01T00:00:00Z"}}})
	if a := do(h, "POST", "/v1/agents/"+agent+"/facts", allToken, fact); a.status != 200 {
		t.Fatalf("fact: %d %s", a.status, a.body)
	}
	for _, c := range []struct {
		withdraw string
		status   int
	}{{"never-raised", http.StatusNotFound}, {"settled", http.StatusConflict}} {
		body := mustJSON(map[string]any{"message": map[string]any{"messageId": "m-" + c.withdraw, "taskId": "task-9", "contextId": "ctx-9",
			"metadata": a2aMeta(map[string]any{
				"expectations": []any{expectationJSON("fresh-"+c.withdraw, "invoice.43.paid", "2099-12-01T09:00:00Z")},
				"withdraw":     []any{c.withdraw},
			})}})
		a := do(h, "POST", "/v1/agents/"+agent+"/a2a", allToken, body)
		if a.status != c.status {
			t.Fatalf("withdrawing %s: status %d, want %d: %s", c.withdraw, a.status, c.status, a.body)
		}
		checkProblem(t, a)
		if g := do(h, "GET", "/v1/agents/"+agent+"/expectations/fresh-"+c.withdraw, allToken, nil); g.status != http.StatusNotFound {
			t.Fatalf("the refused payload's raise was committed: %d %s", g.status, g.body)
		}
	}
	// Withdrawing what the same payload raises is fine.
	body := mustJSON(map[string]any{"message": map[string]any{"messageId": "m-ok", "taskId": "task-9", "contextId": "ctx-9",
		"metadata": a2aMeta(map[string]any{
			"expectations": []any{expectationJSON("short-lived", "invoice.44.paid", "2099-12-01T09:00:00Z")},
			"withdraw":     []any{"short-lived"},
		})}})
	if a := do(h, "POST", "/v1/agents/"+agent+"/a2a", allToken, body); a.status != 200 {
		t.Fatalf("raise and withdraw in one payload: %d %s", a.status, a.body)
	}
}
