package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/authorizer"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/httpapi"
	"github.com/agentclock/clockwork/internal/mcpapi"
)

// authzCase is one request of the authorization matrix. Scope is the one
// scope that allows it (README and design.md section 5), "" for the public
// routes; Bound is true when the request acts for agent-1, so a token for
// another agent is refused.
type authzCase struct {
	name    string
	pattern string
	method  string
	path    string
	body    func(f fixture) []byte
	scope   auth.Scope
	// orScope, when set, is a second scope that also allows the route.
	orScope auth.Scope
	public  bool
	bound   bool
	// unknownID, on routes that address agent-1's resource by an id alone
	// (no agent in the path or body), is an id nothing has: a token for
	// another agent must get exactly the answer that id gets (404), so that
	// ids and their owners cannot be probed. ownID is the id it replaces.
	ownID, unknownID string
}

func a2aMeta(block map[string]any) map[string]any {
	return map[string]any{expect.URI: block}
}

func authzCases() []authzCase {
	static := func(b []byte) func(fixture) []byte { return func(fixture) []byte { return b } }
	factBody := mustJSON(map[string]any{"facts": []any{map[string]any{"factKey": "nothing.waits.on.this", "observedAt": "2026-01-01T00:00:00Z"}}})
	return []authzCase{
		{name: "health", pattern: "GET /healthz", method: "GET", path: "/healthz", public: true},
		{name: "openapi", pattern: "GET /openapi.json", method: "GET", path: "/openapi.json", public: true},
		{name: "put card", pattern: "PUT /v1/agents/{agentId}", method: "PUT", path: "/v1/agents/agent-1", body: static(card()), scope: auth.AgentsWrite, bound: true},
		{name: "get card", pattern: "GET /v1/agents/{agentId}", method: "GET", path: "/v1/agents/agent-1", scope: auth.Read, bound: true},
		{name: "raise", pattern: "POST /v1/agents/{agentId}/expectations", method: "POST", path: "/v1/agents/agent-1/expectations", body: static(raiseBody("exp-authz")), scope: auth.ExpectationsWrite, bound: true},
		{name: "list", pattern: "GET /v1/agents/{agentId}/expectations", method: "GET", path: "/v1/agents/agent-1/expectations?state=open", scope: auth.Read, bound: true},
		{name: "get expectation", pattern: "GET /v1/agents/{agentId}/expectations/{expectationId}", method: "GET", path: "/v1/agents/agent-1/expectations/exp-open", scope: auth.Read, bound: true},
		{name: "acknowledge", pattern: "POST /v1/agents/{agentId}/expectations/{expectationId}/ack", method: "POST", path: "/v1/agents/agent-1/expectations/exp-open/ack",
			body: static(mustJSON(map[string]any{"note": "on it"})), scope: auth.ExpectationsWrite, orScope: auth.ChannelsWrite, bound: true},
		{name: "redeliver", pattern: "POST /v1/agents/{agentId}/expectations/{expectationId}/redeliver", method: "POST", path: "/v1/agents/agent-1/expectations/exp-open/redeliver", scope: auth.ExpectationsWrite, bound: true},
		{name: "facts", pattern: "POST /v1/agents/{agentId}/facts", method: "POST", path: "/v1/agents/agent-1/facts", body: static(factBody), scope: auth.FactsWrite, bound: true},
		{name: "watch push", pattern: "POST /v1/watches/{agentId}/{expectationId}", method: "POST", path: "/v1/watches/agent-1/exp-open",
			body: static(mustJSON(map[string]any{"task": map[string]any{"id": "t", "status": map[string]any{"state": "TASK_STATE_COMPLETED"}}})), public: true},
		{name: "put heartbeat", pattern: "PUT /v1/agents/{agentId}/heartbeats/{name}", method: "PUT", path: "/v1/agents/agent-1/heartbeats/nightly", body: static(mustJSON(map[string]any{"kind": "payment", "every": "PT1H"})), scope: auth.ExpectationsWrite, bound: true},
		{name: "list heartbeats", pattern: "GET /v1/agents/{agentId}/heartbeats", method: "GET", path: "/v1/agents/agent-1/heartbeats", scope: auth.Read, bound: true},
		{name: "get heartbeat", pattern: "GET /v1/agents/{agentId}/heartbeats/{name}", method: "GET", path: "/v1/agents/agent-1/heartbeats/nightly", scope: auth.Read, bound: true},
		{name: "ping", pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/ping", method: "POST", path: "/v1/agents/agent-1/heartbeats/nightly/ping", scope: auth.FactsWrite, bound: true},
		{name: "ping start", pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/ping/start", method: "POST", path: "/v1/agents/agent-1/heartbeats/nightly/ping/start", scope: auth.FactsWrite, bound: true},
		{name: "ping fail", pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/ping/fail", method: "POST", path: "/v1/agents/agent-1/heartbeats/nightly/ping/fail", scope: auth.FactsWrite, bound: true},
		{name: "pause heartbeat", pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/pause", method: "POST", path: "/v1/agents/agent-1/heartbeats/nightly/pause", scope: auth.ExpectationsWrite, bound: true},
		{name: "resume heartbeat", pattern: "POST /v1/agents/{agentId}/heartbeats/{name}/resume", method: "POST", path: "/v1/agents/agent-1/heartbeats/nightly/resume", scope: auth.ExpectationsWrite, bound: true},
		{name: "delete heartbeat", pattern: "DELETE /v1/agents/{agentId}/heartbeats/{name}", method: "DELETE", path: "/v1/agents/agent-1/heartbeats/nightly", scope: auth.ExpectationsWrite, bound: true},
		{name: "withdraw", pattern: "POST /v1/agents/{agentId}/withdrawals", method: "POST", path: "/v1/agents/agent-1/withdrawals", body: static(mustJSON(map[string]any{"withdraw": []any{"exp-never-raised-here"}})), scope: auth.ExpectationsWrite, bound: true},
		{name: "a2a read", pattern: "POST /v1/agents/{agentId}/a2a", method: "POST", path: "/v1/agents/agent-1/a2a",
			body: static(mustJSON(map[string]any{"message": map[string]any{"messageId": "m-1", "taskId": "task-1", "contextId": "ctx-1"}})), scope: auth.Read, bound: true},
		{name: "a2a facts", pattern: "POST /v1/agents/{agentId}/a2a", method: "POST", path: "/v1/agents/agent-1/a2a",
			body: static(mustJSON(map[string]any{"message": map[string]any{"messageId": "m-2", "taskId": "task-1", "contextId": "ctx-1",
				"metadata": a2aMeta(map[string]any{"facts": []any{map[string]any{"factKey": "nothing.waits.on.this", "observedAt": "2026-01-01T00:00:00Z"}}})}})),
			scope: auth.FactsWrite, bound: true},
		{name: "a2a raise", pattern: "POST /v1/agents/{agentId}/a2a", method: "POST", path: "/v1/agents/agent-1/a2a",
			body: static(mustJSON(map[string]any{"artifactUpdate": map[string]any{"taskId": "task-2", "contextId": "ctx-2", "artifact": map[string]any{
				"artifactId": "a-1", "metadata": a2aMeta(map[string]any{"expectations": []any{expectationJSON("exp-a2a", "invoice.42.paid", "2099-12-01T09:00:00Z")}})}}})),
			scope: auth.ExpectationsWrite, bound: true},
		{name: "a2a cancel", pattern: "POST /v1/agents/{agentId}/a2a", method: "POST", path: "/v1/agents/agent-1/a2a",
			body:  static(mustJSON(map[string]any{"statusUpdate": map[string]any{"taskId": "task-3", "contextId": "ctx-3", "status": map[string]any{"state": "TASK_STATE_CANCELED"}}})),
			scope: auth.ExpectationsWrite, bound: true},
		{name: "put credentials", pattern: "PUT /v1/agents/{agentId}/credentials", method: "PUT", path: "/v1/agents/agent-1/credentials",
			body: static(mustJSON(map[string]any{"credentials": map[string]any{"undeclared": map[string]any{"token": "t"}}})), scope: auth.AgentsWrite, bound: true},
		{name: "get credentials", pattern: "GET /v1/agents/{agentId}/credentials", method: "GET", path: "/v1/agents/agent-1/credentials", scope: auth.Read, bound: true},
		{name: "delete credentials", pattern: "DELETE /v1/agents/{agentId}/credentials", method: "DELETE", path: "/v1/agents/agent-1/credentials", scope: auth.AgentsWrite, bound: true},
		{name: "deadletters", pattern: "GET /v1/deadletters", method: "GET", path: "/v1/deadletters", scope: auth.Read},
		{name: "declare", pattern: "POST /v1/anticipations", method: "POST", path: "/v1/anticipations", body: func(fixture) []byte { return anticipation("ant-2", "plan-2") }, scope: auth.AnticipationsWrite, bound: true},
		{name: "replace", pattern: "PUT /v1/anticipations/{id}", method: "PUT", path: "/v1/anticipations/ant-2", body: func(fixture) []byte { return anticipation("ant-2", "plan-2") }, scope: auth.AnticipationsWrite, bound: true},
		{name: "get anticipation", pattern: "GET /v1/anticipations/{id}", method: "GET", path: "/v1/anticipations/ant-1", scope: auth.Read, bound: true, ownID: "ant-1", unknownID: "ant-unknown"},
		{name: "list verifications", pattern: "GET /v1/anticipations/{id}/verifications", method: "GET", path: "/v1/anticipations/ant-1/verifications", scope: auth.Read, bound: true, ownID: "ant-1", unknownID: "ant-unknown"},
		{name: "append event", pattern: "POST /v1/executions/{planId}/events", method: "POST", path: "/v1/executions/plan-1/events", body: static(mustJSON(planEvents[0])), scope: auth.EventsWrite, bound: true, ownID: "plan-1", unknownID: "plan-unknown"},
		{name: "append new event", pattern: "POST /v1/executions/{planId}/events", method: "POST", path: "/v1/executions/plan-1/events",
			body: static(mustJSON(map[string]any{"event_id": "ev-late", "message_type": "ESCALATION", "timestamp": "2026-06-24T10:00:09Z"})), scope: auth.EventsWrite, bound: true, ownID: "plan-1", unknownID: "plan-unknown"},
		{name: "list events", pattern: "GET /v1/executions/{planId}/events", method: "GET", path: "/v1/executions/plan-1/events", scope: auth.Read, bound: true, ownID: "plan-1", unknownID: "plan-unknown"},
		{name: "get verification", pattern: "GET /v1/verifications/{verificationId}", method: "GET", path: "/v1/verifications/{vid}", scope: auth.Read, bound: true, ownID: "{vid}", unknownID: "vrf-unknown"},
		{name: "get bundle", pattern: "GET /v1/verifications/{verificationId}/bundle", method: "GET", path: "/v1/verifications/{vid}/bundle", scope: auth.Read, bound: true, ownID: "{vid}", unknownID: "vrf-unknown"},
		{name: "grade", pattern: "POST /v1/verifications/{verificationId}/grades", method: "POST", path: "/v1/verifications/{vid}/grades",
			body: static(mustJSON(map[string]any{"criterion_id": "hc-1", "score": 1, "rationale": "approved"})), scope: auth.GradesWrite, bound: true, ownID: "{vid}", unknownID: "vrf-unknown"},
		{name: "export traces", pattern: "POST /v1/traces", method: "POST", path: "/v1/traces", body: static([]byte(`{"resourceSpans":[]}`)), scope: auth.EventsWrite},
		{name: "start evaluation", pattern: "POST /v1/evaluations", method: "POST", path: "/v1/evaluations", body: static(evaluationBody()), scope: auth.GradesWrite, bound: true},
		{name: "list evaluations", pattern: "GET /v1/agents/{agentId}/evaluations", method: "GET", path: "/v1/agents/agent-1/evaluations", scope: auth.Read, bound: true},
		{name: "get evaluation", pattern: "GET /v1/evaluations/{evaluationId}", method: "GET", path: "/v1/evaluations/{eid}", scope: auth.Read, bound: true, ownID: "{eid}", unknownID: "evl-unknown"},
		{name: "put evaluator", pattern: "PUT /v1/agents/{agentId}/evaluators/{name}", method: "PUT", path: "/v1/agents/agent-1/evaluators/sampled",
			body:  static(mustJSON(map[string]any{"criteria": []any{map[string]any{"criterion_id": "few", "description": "few steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 5", "weight": 1}}, "sample": 0.1})),
			scope: auth.GradesWrite, bound: true},
		{name: "list evaluators", pattern: "GET /v1/agents/{agentId}/evaluators", method: "GET", path: "/v1/agents/agent-1/evaluators", scope: auth.Read, bound: true},
		{name: "get evaluator", pattern: "GET /v1/agents/{agentId}/evaluators/{name}", method: "GET", path: "/v1/agents/agent-1/evaluators/sampled", scope: auth.Read, bound: true},
		{name: "evaluator verifications", pattern: "GET /v1/agents/{agentId}/evaluators/{name}/verifications", method: "GET", path: "/v1/agents/agent-1/evaluators/sampled/verifications", scope: auth.Read, bound: true},
		{name: "delete evaluator", pattern: "DELETE /v1/agents/{agentId}/evaluators/{name}", method: "DELETE", path: "/v1/agents/agent-1/evaluators/sampled", scope: auth.GradesWrite, bound: true},
		// Review queues: ops-review belongs to agent-1 (the grades:write
		// token made it); plan-3's item {iid} is in it.
		{name: "put review queue", pattern: "PUT /v1/review-queues/{queueId}", method: "PUT", path: "/v1/review-queues/ops-review", body: static(reviewQueueBody()), scope: auth.GradesWrite},
		{name: "list review queues", pattern: "GET /v1/review-queues", method: "GET", path: "/v1/review-queues", scope: auth.Read},
		{name: "get review queue", pattern: "GET /v1/review-queues/{queueId}", method: "GET", path: "/v1/review-queues/ops-review", scope: auth.Read, ownID: "ops-review", unknownID: "no-such-queue"},
		// Items are filtered by the agents the token acts for: another
		// tenant lists none, as it would of an unknown queue.
		{name: "list review items", pattern: "GET /v1/review-queues/{queueId}/items", method: "GET", path: "/v1/review-queues/ops-review/items?assignee=me", scope: auth.Read},
		{name: "get review item", pattern: "GET /v1/review-queues/{queueId}/items/{itemId}", method: "GET", path: "/v1/review-queues/ops-review/items/{iid}", scope: auth.Read, ownID: "{iid}", unknownID: "rvi-unknown"},
		{name: "post review", pattern: "POST /v1/review-queues/{queueId}/items/{itemId}/reviews", method: "POST", path: "/v1/review-queues/ops-review/items/{iid}/reviews",
			body: static(mustJSON(map[string]any{"criterionId": "hc-1", "grade": "PASS", "comment": "approved"})), scope: auth.GradesWrite, ownID: "{iid}", unknownID: "rvi-unknown"},
		{name: "review agreement", pattern: "GET /v1/review-queues/{queueId}/agreement", method: "GET", path: "/v1/review-queues/ops-review/agreement", scope: auth.Read, ownID: "ops-review", unknownID: "no-such-queue"},
		{name: "delete review queue", pattern: "DELETE /v1/review-queues/{queueId}", method: "DELETE", path: "/v1/review-queues/ops-review", scope: auth.GradesWrite, ownID: "ops-review", unknownID: "no-such-queue"},
		{name: "verify key", pattern: "GET /v1/keys/verify", method: "GET", path: "/v1/keys/verify", scope: auth.Read},
		// A tools/call is authorised like the tool's route (get_expectation: read, agent-1).
		{name: "mcp tools/call", pattern: "POST /mcp", method: "POST", path: "/mcp", body: static(mustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": "get_expectation", "arguments": map[string]any{"agentId": "agent-1", "expectationId": "exp-open"}}})), scope: auth.Read, bound: true},
		{name: "console", pattern: "GET /console", method: "GET", path: "/console", public: true},
		{name: "console asset", pattern: "GET /console/{asset}", method: "GET", path: "/console/app.js", public: true},
		{name: "list agents", pattern: "GET /v1/agents", method: "GET", path: "/v1/agents", scope: auth.Read},
		{name: "put channel", pattern: "PUT /v1/channels/{channelId}", method: "PUT", path: "/v1/channels/tenant-hook",
			body: static(mustJSON(map[string]any{"type": "webhook", "url": "https://127.0.0.1:9/hook"})), scope: auth.ChannelsWrite},
		{name: "list channels", pattern: "GET /v1/channels", method: "GET", path: "/v1/channels", scope: auth.Read},
		{name: "get channel", pattern: "GET /v1/channels/{channelId}", method: "GET", path: "/v1/channels/ops-hook", scope: auth.Read, ownID: "ops-hook", unknownID: "no-such-hook"},
		{name: "test channel", pattern: "POST /v1/channels/{channelId}/test", method: "POST", path: "/v1/channels/ops-hook/test", scope: auth.ChannelsWrite, ownID: "ops-hook", unknownID: "no-such-hook"},
		{name: "channel dead letters", pattern: "GET /v1/channels/{channelId}/deadletters", method: "GET", path: "/v1/channels/ops-hook/deadletters", scope: auth.Read, ownID: "ops-hook", unknownID: "no-such-hook"},
		{name: "replay notification", pattern: "POST /v1/channels/{channelId}/deadletters/{notificationId}/replay", method: "POST",
			path: "/v1/channels/ops-hook/deadletters/ntf_none/replay?agentId=agent-1", scope: auth.ChannelsWrite, ownID: "ops-hook", unknownID: "no-such-hook"},
		{name: "put alerts", pattern: "PUT /v1/agents/{agentId}/alerts", method: "PUT", path: "/v1/agents/agent-1/alerts",
			body: static(mustJSON(map[string]any{"rules": []any{map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"ops-hook"}}}})), scope: auth.AgentsWrite, bound: true},
		{name: "get alerts", pattern: "GET /v1/agents/{agentId}/alerts", method: "GET", path: "/v1/agents/agent-1/alerts", scope: auth.Read, bound: true},
		{name: "list notifications", pattern: "GET /v1/agents/{agentId}/notifications", method: "GET", path: "/v1/agents/agent-1/notifications?expectationId=exp-open", scope: auth.Read, bound: true},
		{name: "delete alerts", pattern: "DELETE /v1/agents/{agentId}/alerts", method: "DELETE", path: "/v1/agents/agent-1/alerts", scope: auth.AgentsWrite, bound: true},
		{name: "put silence", pattern: "PUT /v1/silences/{silenceId}", method: "PUT", path: "/v1/silences/ops-quiet", body: static(silenceBody()), scope: auth.ChannelsWrite, bound: true},
		{name: "list silences", pattern: "GET /v1/silences", method: "GET", path: "/v1/silences", scope: auth.Read},
		{name: "get silence", pattern: "GET /v1/silences/{silenceId}", method: "GET", path: "/v1/silences/ops-quiet", scope: auth.Read, ownID: "ops-quiet", unknownID: "no-such-silence"},
		{name: "delete silence", pattern: "DELETE /v1/silences/{silenceId}", method: "DELETE", path: "/v1/silences/ops-quiet", scope: auth.ChannelsWrite, ownID: "ops-quiet", unknownID: "no-such-silence"},
		{name: "delete channel", pattern: "DELETE /v1/channels/{channelId}", method: "DELETE", path: "/v1/channels/ops-hook", scope: auth.ChannelsWrite, ownID: "ops-hook", unknownID: "no-such-hook"},
		{name: "list anticipations", pattern: "GET /v1/agents/{agentId}/anticipations", method: "GET", path: "/v1/agents/agent-1/anticipations", scope: auth.Read, bound: true},
		// Last: the every-scope caller erases agent-1 (its card is PUT again
		// by the first cases of the next mode).
		{name: "erase agent", pattern: "DELETE /v1/agents/{agentId}", method: "DELETE", path: "/v1/agents/agent-1", scope: auth.AgentsWrite, bound: true},
	}
}

// knownIssues lists matrix cells where the server is known to be wrong,
// with the reason; they are logged rather than failed, and fail once the
// server is fixed so that the entry is removed. Key: case name + " / " +
// caller.
var knownIssues = map[string]string{}

var problemTypes = regexp.MustCompile(`^https://clockwork\.dev/problems/[a-z-]+$`)

// TestAuthorizationMatrix sends every route (the /a2a route once per kind
// of content) with no token, a bad token, a token with each single scope,
// a token for another agent and a token with every scope, and checks
// 401/403/allowed (allowed: anything but 401 and 403, and never 5xx); a
// token for another agent gets, on routes that address a resource by id
// alone, exactly the 404 an unknown id gets. It
// runs twice: against the handler as the local server serves it, and as
// the AWS deployment does, behind API Gateway's Lambda authorizer
// (gateway): there the gateway itself refuses a missing token (401) or an
// unknown one (403) and the API function trusts the authorizer's context.
func TestAuthorizationMatrix(t *testing.T) {
	ap := startApp(t)
	h := ap.Handler
	f := seed(t, h)
	cases := authzCases()

	// Every served route is in the matrix.
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.pattern] = true
	}
	for _, p := range h.Patterns() {
		if !covered[p] {
			t.Errorf("route %q has no case in the authorization matrix", p)
		}
	}

	tokens := mustJSON(map[string]any{"tokens": testTokens()})
	authz := &authorizer.Authorizer{Load: func(context.Context) ([]byte, error) { return tokens, nil }, Log: quietLog()}
	behindGateway := httpapi.New(ap.Watcher, ap.Eval, authorizer.Gateway{Log: quietLog()}, quietLog())
	behindGateway.Credentials = ap.Credentials
	behindGateway.Notify = ap.Notify
	behindGateway.Traces = ap.Handler.Traces
	mcpapi.Mount(behindGateway)
	public := map[string]bool{}
	for _, c := range cases {
		if c.public {
			public[c.method+" "+c.path] = true
		}
	}
	modes := []struct {
		name    string
		handler http.Handler
		aws     bool
	}{
		{"local", h, false},
		{"aws", gateway(t, authz, behindGateway, func(method, path string) bool { return public[method+" "+path] }), true},
	}

	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			n := runMatrix(t, mode.handler, cases, f, mode.aws)
			t.Logf("authorization matrix (%s): %d routes, %d cases, %d requests", mode.name, len(h.Patterns()), len(cases), n)
		})
	}
}

func runMatrix(t *testing.T, h http.Handler, cases []authzCase, f fixture, aws bool) int {
	type caller struct {
		name  string
		token string
		// want: "401", "403" or "allowed"
		want func(c authzCase) string
		// notification sends token as the A2A 0.3 push sender does, in
		// X-A2A-Notification-Token instead of Authorization.
		notification bool
	}
	push := func(c authzCase) bool { return c.pattern == auth.PushRoute }
	callers := []caller{
		// Behind API Gateway the push route's authorizer has no identity
		// source (a push carries either header), so API Gateway invokes it
		// and its refusal is a 403.
		{name: "no token", want: func(c authzCase) string { return pick(c.public, "allowed", pick(aws && push(c), "403", "401")) }},
		// Behind API Gateway, the Lambda authorizer's refusal is a 403
		// (HTTP APIs cannot answer it otherwise).
		{name: "bad token", token: badToken, want: func(c authzCase) string { return pick(c.public, "allowed", pick(aws, "403", "401")) }},
		// The notification token is a credential on the push route only.
		{name: "notification token", token: allToken, notification: true, want: func(c authzCase) string {
			return pick(c.public || push(c), "allowed", "401")
		}},
		{name: "bad notification token", token: badToken, notification: true, want: func(c authzCase) string {
			return pick(c.public, "allowed", pick(aws && push(c), "403", "401"))
		}},
		{name: "scope read as notification token", token: scopeToken(auth.Read), notification: true, want: func(c authzCase) string {
			return pick(c.public || (push(c) && c.scope == auth.Read), "allowed", pick(push(c), "403", "401"))
		}},
	}
	for _, s := range auth.AllScopes {
		s := s
		callers = append(callers, caller{name: "scope " + string(s), token: scopeToken(s), want: func(c authzCase) string {
			return pick(c.public || c.scope == s || c.orScope == s, "allowed", "403")
		}})
	}
	callers = append(callers,
		caller{name: "token for another agent", token: otherToken, want: func(c authzCase) string {
			return pick(c.unknownID != "", "as unknown", pick(c.bound, "403", "allowed"))
		}},
		caller{name: "every scope", token: allToken, want: func(c authzCase) string { return "allowed" }},
	)

	n := 0
	for _, c := range cases {
		for _, cl := range callers {
			n++
			name := c.name + " / " + cl.name
			t.Run(name, func(t *testing.T) {
				var body []byte
				if c.body != nil {
					body = c.body(f)
				}
				path := f.expand(c.path)
				hdr := http.Header{}
				switch {
				case cl.notification:
					hdr.Set(auth.NotificationTokenHeader, cl.token)
				case cl.token != "":
					hdr.Set("Authorization", "Bearer "+cl.token)
				}
				a := doHeaders(h, c.method, path, hdr, body)
				got := "allowed"
				switch a.status {
				case http.StatusUnauthorized:
					got = "401"
				case http.StatusForbidden:
					got = "403"
				}
				want := cl.want(c)
				if a.status >= 500 {
					t.Fatalf("%s %s: %d %s", c.method, path, a.status, a.body)
				}
				if want == "as unknown" {
					own := f.expand(c.ownID)
					unknownPath := strings.Replace(path, own, c.unknownID, 1)
					u := doHeaders(h, c.method, unknownPath, hdr, body)
					same := strings.ReplaceAll(string(u.body), c.unknownID, own)
					if a.status != http.StatusNotFound || u.status != a.status || same != string(a.body) {
						t.Fatalf("another agent's %s answers %d %s; an unknown id answers %d %s", own, a.status, a.body, u.status, u.body)
					}
					return
				}
				if why, known := knownIssues[name]; known {
					if got == want {
						t.Fatalf("known issue no longer reproduces (remove it from knownIssues): %s", why)
					}
					t.Logf("KNOWN SERVER ISSUE: %s %s answers %d, want %s: %s", c.method, path, a.status, want, why)
					return
				}
				if got != want {
					t.Fatalf("%s %s: status %d (%s), want %s: %s", c.method, path, a.status, got, want, a.body)
				}
				byGateway := a.header.Get(answeredBy) == "gateway"
				if byGateway && (!aws || ((cl.token == allToken || cl.token == otherToken) && !cl.notification)) {
					t.Fatalf("the gateway refused a request the API function should have answered: %d %s", a.status, a.body)
				}
				if (got == "401" || got == "403") && !byGateway {
					checkProblem(t, a)
				}
				if got == "401" && !byGateway && a.header.Get("WWW-Authenticate") == "" {
					t.Errorf("401 without WWW-Authenticate")
				}
			})
		}
	}
	return n
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

func checkProblem(t *testing.T, a answer) {
	t.Helper()
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("content type %q", ct)
	}
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("problem %s: %v", a.body, err)
	}
	if p.Status != a.status || p.Title == "" || !problemTypes.MatchString(p.Type) || p.Detail == "" {
		t.Errorf("problem %s does not describe a %d", a.body, a.status)
	}
}

// TestMCPOrigin: /mcp refuses a browser origin it was not told to allow
// (the MCP specification's defence against DNS rebinding of a server on
// loopback), serves an allowed one, and serves clients that send no Origin.
func TestMCPOrigin(t *testing.T) {
	ap := startApp(t)
	h := ap.Handler
	list := mustJSON(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
	send := func(origin string) answer {
		hdr := http.Header{}
		hdr.Set("Authorization", "Bearer "+allToken)
		hdr.Set("Content-Type", "application/json")
		hdr.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			hdr.Set("Origin", origin)
		}
		return doHeaders(h, "POST", "/mcp", hdr, list)
	}
	if a := send("http://evil.example"); a.status != http.StatusForbidden {
		t.Fatalf("Origin http://evil.example: %d %s", a.status, a.body)
	} else {
		checkProblem(t, a)
	}
	if a := send(""); a.status != http.StatusOK {
		t.Fatalf("no Origin: %d %s", a.status, a.body)
	}
	h.MCPAllowedOrigins = []string{"https://console.example"}
	if a := send("https://console.example"); a.status != http.StatusOK {
		t.Fatalf("allowed Origin: %d %s", a.status, a.body)
	}
	if a := send("https://console.example.evil.example"); a.status != http.StatusForbidden {
		t.Fatalf("an origin that only starts like an allowed one: %d %s", a.status, a.body)
	}
}
