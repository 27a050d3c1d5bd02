package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
)

// The tokens of the in-process runtime: one with every scope for every
// agent, one per scope for agent-1, and one with every scope for agent-2
// only.
const (
	allToken   = "all-scopes-token"
	otherToken = "other-agent-token"
	badToken   = "not-a-token"
	agent      = "agent-1"
)

func scopeToken(s auth.Scope) string { return "scope-" + string(s) + "-token" }

func testTokens() []auth.TokenSpec {
	specs := []auth.TokenSpec{
		{Token: allToken, Principal: "admin", Scopes: auth.AllScopes, Agents: []string{"*"}},
		{Token: otherToken, Principal: "other", Scopes: auth.AllScopes, Agents: []string{"agent-2"}},
	}
	for _, s := range auth.AllScopes {
		specs = append(specs, auth.TokenSpec{Token: scopeToken(s), Principal: "only-" + string(s), Scopes: []auth.Scope{s}, Agents: []string{agent}})
	}
	return specs
}

// nullSender stands for lapse delivery: nothing leaves the process.
type nullSender struct{}

func (nullSender) Send(context.Context, expect.Card, a2aout.Message) (string, error) {
	return "", errors.New("delivery is off in this test")
}

// startApp starts the embedded runtime in-process on a temporary data
// directory.
func startApp(t testing.TB) *app.App {
	t.Helper()
	a, err := auth.New(testTokens())
	if err != nil {
		t.Fatal(err)
	}
	ap, err := app.Start(app.Config{
		DataDir: t.TempDir(), Auth: a, NoSync: true, Sender: nullSender{},
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ap.Close() })
	return ap
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// do serves one request in-process ("" token sends none).
func do(h http.Handler, method, path, token string, body []byte) answer {
	hdr := http.Header{}
	if token != "" {
		hdr.Set("Authorization", "Bearer "+token)
	}
	return doHeaders(h, method, path, hdr, body)
}

// doHeaders serves one request with the given headers in-process.
func doHeaders(h http.Handler, method, path string, hdr http.Header, body []byte) answer {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	for k, v := range hdr {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return answer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func card() []byte {
	return mustJSON(map[string]any{
		"name": "Billing agent", "description": "Chases invoices", "version": "1.0.0",
		"supportedInterfaces": []any{map[string]any{"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities": map[string]any{"extensions": []any{map[string]any{"uri": expect.URI, "params": map[string]any{
			"keepsTime": true, "lapseSkill": "handle-lapse",
			"kinds": []any{map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "An issued invoice is paid", "basis": "contract"}}}}}},
		"skills": []any{map[string]any{"id": "handle-lapse", "name": "Handle lapse", "description": "Acts on a lapsed expectation", "tags": []any{"lapse"}}},
	})
}

func expectationJSON(id, factKey, due string) map[string]any {
	return map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": "42"},
		"expects": "invoice 42 is paid", "satisfiedBy": map[string]any{"factKey": factKey}, "dueAt": due, "basis": "contract"}
}

func raiseBody(id string) []byte {
	return mustJSON(map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": []any{expectationJSON(id, "invoice.42.paid", "2099-12-01T09:00:00Z")}})
}

// anticipation returns a signed ANTICIPATE of agent-1 for plan with a
// DETERMINISTIC and a HUMAN criterion.
func anticipation(id, plan string) []byte { return anticipationFor(id, plan, "") }

// anticipationFor is anticipation with hc-1 reviewed in queue (none: "").
func anticipationFor(id, plan, queue string) []byte {
	hc := map[string]any{"criterion_id": "hc-1", "description": "A reviewer approves", "measurement": "HUMAN", "assertion": "The change is what was asked for", "weight": 1}
	if queue != "" {
		hc["queue"] = queue
	}
	raw := mustJSON(map[string]any{
		"protocol_version": "4.1", "message_type": "ANTICIPATE", "app_id": "app-1", "agent_id": agent,
		"anticipation_id": id, "plan_id": plan, "scope_envelope_id": "scope-1", "session_id": "ses-1",
		"timestamp": "2026-06-24T10:00:00Z",
		"expectations": map[string]any{
			"outcome_criteria": []any{
				map[string]any{"criterion_id": "oc-1", "description": "The user exists", "measurement": "DETERMINISTIC", "assertion": "user_exists('alice')", "weight": 1},
				hc,
			},
		},
		"grading_policy": map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": false},
	})
	out, err := anticipate.Sign(raw)
	if err != nil {
		panic(err)
	}
	return out
}

var planEvents = []map[string]any{
	{"event_id": "ev-1", "message_type": "STEP_COMPLETE", "timestamp": "2026-06-24T10:00:01Z"},
	{"event_id": "ev-2", "message_type": "OUTCOME", "timestamp": "2026-06-24T10:00:02Z",
		"observations": []any{map[string]any{"call": "user_exists", "args": []any{"alice"}, "value": true}}},
	{"event_id": "ev-3", "message_type": "PLAN_COMPLETE", "timestamp": "2026-06-24T10:00:03Z"},
}

// fixture is what seed created.
type fixture struct {
	verificationID string
	evaluationID   string
	// reviewItemID is plan-3's item in review queue ops-review.
	reviewItemID string
}

// expand replaces the fixture's placeholders in s: {vid}, {eid}, {iid}.
func (f fixture) expand(s string) string {
	return strings.NewReplacer("{vid}", f.verificationID, "{eid}", f.evaluationID, "{iid}", f.reviewItemID).Replace(s)
}

// reviewQueueBody is ops-review's: its reviewers are the grades:write
// token's principal and the operator.
func reviewQueueBody() []byte {
	return mustJSON(map[string]any{"reviewers": []string{"only-" + string(auth.GradesWrite), "admin"}, "reviewsPerItem": 1, "due": "PT4H"})
}

// evaluationBody re-grades agent-1's plans with one DETERMINISTIC criterion.
func evaluationBody() []byte {
	return mustJSON(map[string]any{"filter": map[string]any{"agentId": agent}, "criteria": []any{map[string]any{"criterion_id": "few-steps",
		"description": "few steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 5", "weight": 1}},
		"gradingPolicy": map[string]any{"grader_type": "CODE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": true}})
}

// seed creates agent-1's card and expectations, an unsealed anticipation
// (ant-2, plan-2) and a sealed one (ant-1) whose plan-1 completed, and
// waits for plan-1's VERIFY.
func seed(t testing.TB, h http.Handler) fixture {
	t.Helper()
	must := func(a answer, ok ...int) {
		t.Helper()
		for _, c := range ok {
			if a.status == c {
				return
			}
		}
		t.Fatalf("seed: status %d: %s", a.status, a.body)
	}
	must(do(h, "PUT", "/v1/agents/"+agent, allToken, card()), 200)
	must(do(h, "POST", "/v1/agents/"+agent+"/expectations", allToken, raiseBody("exp-open")), 200)
	must(do(h, "PUT", "/v1/agents/"+agent+"/heartbeats/nightly", allToken, mustJSON(map[string]any{"kind": "payment", "every": "PT1H"})), 201)
	must(do(h, "PUT", "/v1/channels/ops-hook", allToken, mustJSON(map[string]any{"type": "webhook", "url": "https://127.0.0.1:9/hook", "shared": false})), 200, 201)
	must(do(h, "PUT", "/v1/silences/ops-quiet", allToken, silenceBody()), 201)
	must(do(h, "POST", "/v1/anticipations", allToken, anticipation("ant-2", "plan-2")), 201)
	must(do(h, "POST", "/v1/anticipations", allToken, anticipation("ant-1", "plan-1")), 201)
	for _, ev := range planEvents {
		must(do(h, "POST", "/v1/executions/plan-1/events", allToken, mustJSON(ev)), 202)
	}
	// plan-3's hc-1 is reviewed in agent-1's queue ops-review.
	must(do(h, "PUT", "/v1/review-queues/ops-review", scopeToken(auth.GradesWrite), reviewQueueBody()), 200, 201)
	must(do(h, "POST", "/v1/anticipations", allToken, anticipationFor("ant-3", "plan-3", "ops-review")), 201)
	for _, ev := range planEvents {
		must(do(h, "POST", "/v1/executions/plan-3/events", allToken, mustJSON(ev)), 202)
	}
	itemID := ""
	for deadline := time.Now().Add(20 * time.Second); itemID == ""; {
		a := do(h, "GET", "/v1/review-queues/ops-review/items", allToken, nil)
		must(a, 200)
		var page struct {
			Items []struct {
				ID string `json:"itemId"`
			} `json:"items"`
		}
		if err := json.Unmarshal(a.body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Items) > 0 {
			itemID = page.Items[0].ID
		} else if time.Now().After(deadline) {
			t.Fatal("seed: no review item for plan-3")
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		a := do(h, "GET", "/v1/anticipations/ant-1/verifications", allToken, nil)
		must(a, 200)
		var vs struct {
			Verifications []struct {
				ID string `json:"verification_id"`
			} `json:"verifications"`
		}
		if err := json.Unmarshal(a.body, &vs); err != nil {
			t.Fatal(err)
		}
		if len(vs.Verifications) > 0 {
			a := do(h, "POST", "/v1/evaluations", allToken, evaluationBody())
			must(a, 202)
			var ev struct {
				ID string `json:"evaluationId"`
			}
			if err := json.Unmarshal(a.body, &ev); err != nil || ev.ID == "" {
				t.Fatalf("seed: evaluation %s", a.body)
			}
			return fixture{verificationID: vs.Verifications[0].ID, evaluationID: ev.ID, reviewItemID: itemID}
		}
		if time.Now().After(deadline) {
			t.Fatal("seed: no VERIFY for plan-1")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// silenceBody silences agent-1 in a window far in the future (it holds
// nothing back in the tests).
func silenceBody() []byte {
	return mustJSON(map[string]any{"matchers": map[string]any{"agentId": agent}, "startsAt": "2099-01-01T00:00:00Z", "endsAt": "2099-01-02T00:00:00Z", "comment": "later"})
}
