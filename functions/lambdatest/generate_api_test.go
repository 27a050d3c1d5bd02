package lambdatest

// The sample API Gateway requests of the generated events: HTTP API
// payload 2.0 with the authorizer's context, as API Gateway sends them.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
)

// apiEvent is one request of the sample session and its expected status.
type apiEvent struct {
	file    string
	status  int
	method  string
	route   string // as declared on the HTTP API, e.g. /v1/agents/{agentId}
	params  map[string]string
	query   map[string]string // in this order of keys: sorted
	body    any               // encoded as compact JSON; a []byte is sent as is
	noAuth  bool
	public  bool // deployed without the authorizer: no authorizer context
	headers map[string]string
}

// The payload v2 shape, field for field as API Gateway sends it (the
// events package's struct would also emit an empty authentication block).
type v2Request struct {
	Version               string            `json:"version"`
	RouteKey              string            `json:"routeKey"`
	RawPath               string            `json:"rawPath"`
	RawQueryString        string            `json:"rawQueryString"`
	Headers               map[string]string `json:"headers"`
	QueryStringParameters map[string]string `json:"queryStringParameters,omitempty"`
	PathParameters        map[string]string `json:"pathParameters,omitempty"`
	RequestContext        v2Context         `json:"requestContext"`
	Body                  string            `json:"body,omitempty"`
	IsBase64Encoded       bool              `json:"isBase64Encoded"`
}

type v2Context struct {
	AccountID    string        `json:"accountId"`
	APIID        string        `json:"apiId"`
	Authorizer   *v2Authorizer `json:"authorizer,omitempty"`
	DomainName   string        `json:"domainName"`
	DomainPrefix string        `json:"domainPrefix"`
	HTTP         v2HTTP        `json:"http"`
	RequestID    string        `json:"requestId"`
	RouteKey     string        `json:"routeKey"`
	Stage        string        `json:"stage"`
	Time         string        `json:"time"`
	TimeEpoch    int64         `json:"timeEpoch"`
}

// v2Authorizer is what API Gateway passes on from a Lambda authorizer
// with simple responses: its context, under "lambda".
type v2Authorizer struct {
	Lambda map[string]any `json:"lambda"`
}

type v2HTTP struct {
	Method    string `json:"method"`
	Path      string `json:"path"`
	Protocol  string `json:"protocol"`
	SourceIP  string `json:"sourceIp"`
	UserAgent string `json:"userAgent"`
}

// The API the sample requests claim to reach, and their client.
const (
	sampleDomain    = "a1b2c3d4e5.execute-api.us-east-1.amazonaws.com"
	sampleUserAgent = "curl/8.5.0"
)

// sampleContext is the requestContext API Gateway sends with a sample
// request (to the API function, with the authorizer's context, or to the
// authorizer).
func sampleContext(method, route, path, requestID string, at time.Time, authorizer *v2Authorizer) v2Context {
	return v2Context{
		AccountID: "123456789012", APIID: "a1b2c3d4e5", Authorizer: authorizer, DomainName: sampleDomain, DomainPrefix: "a1b2c3d4e5",
		HTTP:      v2HTTP{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.10", UserAgent: sampleUserAgent},
		RequestID: requestID, RouteKey: method + " " + route,
		Stage: "$default", Time: at.Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: at.UnixMilli(),
	}
}

// requestTime is the (fixed) time the sample requests claim to be sent.
var requestTime = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

func (e apiEvent) encode(t testing.TB, seq int) []byte {
	t.Helper()
	path := e.route
	for k, v := range e.params {
		path = strings.ReplaceAll(path, "{"+k+"}", v)
	}
	var rawQuery []string
	keys := make([]string, 0, len(e.query))
	for k := range e.query {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rawQuery = append(rawQuery, k+"="+e.query[k])
	}
	headers := map[string]string{
		"accept":            "application/json",
		"host":              sampleDomain,
		"user-agent":        sampleUserAgent,
		"x-amzn-trace-id":   "Root=1-6943f2a0-0123456789abcdef01234567",
		"x-forwarded-for":   "203.0.113.10",
		"x-forwarded-port":  "443",
		"x-forwarded-proto": "https",
	}
	var authorizerContext *v2Authorizer
	if !e.noAuth {
		headers["authorization"] = "Bearer " + SampleToken
		if !e.public {
			authorizerContext = &v2Authorizer{Lambda: SampleAuthorizerContext(t)}
		}
	}
	var body string
	switch b := e.body.(type) {
	case nil:
	case []byte:
		body = string(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		body = string(raw)
	}
	if body != "" {
		headers["content-type"] = "application/json"
		headers["content-length"] = fmt.Sprint(len(body))
	}
	for k, v := range e.headers {
		headers[k] = v
	}
	at := requestTime.Add(time.Duration(seq) * time.Second)
	req := v2Request{
		Version: "2.0", RouteKey: e.method + " " + e.route, RawPath: path, RawQueryString: strings.Join(rawQuery, "&"),
		Headers: headers, QueryStringParameters: e.query, PathParameters: e.params,
		RequestContext: sampleContext(e.method, e.route, path, "sample-"+strings.TrimSuffix(e.file, ".json"), at, authorizerContext),
		Body:           body,
	}
	return indent(t, req)
}

// apiEvents is the sample session: register the agent, raise, read and
// list expectations, report facts, withdraw, report over A2A, declare the
// seed ANTICIPATE and run its plan, then two refused requests.
func apiEvents(t testing.TB) []apiEvent {
	t.Helper()
	agent := map[string]string{"agentId": AgentID}
	exp := func(id, invoice, due, grace, horizon string) map[string]any {
		m := map[string]any{
			"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": invoice},
			"expects": "invoice " + invoice + " is paid", "satisfiedBy": map[string]any{"factKey": "invoice." + invoice + ".paid"},
			"dueAt": due, "basis": "contract",
		}
		if grace != "" {
			m["grace"] = grace
		}
		if horizon != "" {
			m["horizon"] = horizon
		}
		return m
	}
	event := func(id, typ, ts string, fields ...any) map[string]any {
		// As an RFC-032 emitter sends it: message_type, protocol_version,
		// the context fields, and a trace id the server keeps unread.
		m := map[string]any{"protocol_version": "4.1", "message_type": typ, "event_id": id, "plan_id": PlanID,
			"agent_id": "agent-gandalf-spell-executor-001", "session_id": "ses-xyz789", "timestamp": ts,
			"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}
		for i := 0; i+1 < len(fields); i += 2 {
			m[fields[i].(string)] = fields[i+1]
		}
		return m
	}
	obs := func(call string, value any, args ...any) map[string]any {
		return map[string]any{"call": call, "args": args, "value": value}
	}
	plan := map[string]string{"planId": PlanID}
	return []apiEvent{
		{file: "01-healthz.json", status: 200, method: "GET", route: "/healthz", public: true},
		{file: "02-put-agent-card.json", status: 200, method: "PUT", route: "/v1/agents/{agentId}", params: agent, body: agentCard()},
		{file: "03-raise-expectations.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/expectations", params: agent,
			body: map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": []any{
				exp(Scheduled, "42", "2036-12-01T09:00:00Z", "PT2H", "2036-12-05T09:00:00Z"),
				exp(Lapsing, "43", "2026-01-15T09:00:00Z", "PT2H", "2026-01-20T09:00:00Z"),
				exp("inv-44-paid", "44", "2036-12-01T09:00:00Z", "P1D", ""),
				exp("inv-45-paid", "45", "2036-12-01T09:00:00Z", "", ""),
				exp("inv-46-paid", "46", "2036-12-01T09:00:00Z", "PT2H", ""),
			}}},
		{file: "04-get-expectation.json", status: 200, method: "GET", route: "/v1/agents/{agentId}/expectations/{expectationId}",
			params: map[string]string{"agentId": AgentID, "expectationId": Scheduled}},
		{file: "05-list-expectations.json", status: 200, method: "GET", route: "/v1/agents/{agentId}/expectations", params: agent,
			query: map[string]string{"state": "open", "limit": "50"}},
		{file: "06-report-facts.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/facts", params: agent,
			body: map[string]any{"facts": []any{map[string]any{"factKey": "invoice.44.paid", "observedAt": "2026-11-01T08:12:00Z"}}}},
		{file: "07-withdraw.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/withdrawals", params: agent,
			body: map[string]any{"withdraw": []string{"inv-45-paid"}, "reason": "invoice 45 was cancelled"}},
		{file: "08-a2a-status-update.json", status: 200, method: "POST", route: "/v1/agents/{agentId}/a2a", params: agent,
			headers: map[string]string{"a2a-extensions": expect.URI},
			body: map[string]any{"statusUpdate": map[string]any{
				"taskId": "task-1", "contextId": "ctx-1",
				"status": map[string]any{
					"state": "TASK_STATE_WORKING", "timestamp": "2026-11-02T08:05:00Z",
					"message": map[string]any{
						"messageId": "msg-status-1", "role": "ROLE_AGENT", "taskId": "task-1", "contextId": "ctx-1",
						"parts":    []any{map[string]any{"text": "Invoice 46 was paid."}},
						"metadata": map[string]any{expect.URI: map[string]any{"facts": []any{map[string]any{"factKey": "invoice.46.paid", "observedAt": "2026-11-02T08:00:00Z"}}}},
					},
				},
			}}},
		{file: "09-declare-anticipation.json", status: 201, method: "POST", route: "/v1/anticipations", body: signedSeed(t)},
		{file: "10-execution-tool-request.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-001", "TOOL_REQUEST", "2026-06-24T10:00:05Z", "tool", "iam_create_user", "arguments", map[string]any{"username": "alice", "group": "engineering"})},
		{file: "11-execution-step-complete.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-002", "STEP_COMPLETE", "2026-06-24T10:00:09Z")},
		{file: "12-execution-outcome.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-003", "OUTCOME", "2026-06-24T10:00:10Z", "variables", map[string]any{"target_username": "alice"}, "observations", []any{
				obs("user_exists", true, "alice"), obs("group_member", true, "alice", "engineering"),
				obs("policy_count", 3, "alice"), obs("group_policy_count", 3, "engineering"),
			})},
		{file: "13-execution-plan-complete.json", status: 202, method: "POST", route: "/v1/executions/{planId}/events", params: plan,
			body: event("evt-004", "PLAN_COMPLETE", "2026-06-24T10:00:11Z")},
		{file: "14-unauthorized.json", status: 401, method: "GET", route: "/v1/agents/{agentId}/expectations/{expectationId}", noAuth: true,
			params: map[string]string{"agentId": AgentID, "expectationId": Scheduled}},
		{file: "15-invalid-body.json", status: 400, method: "POST", route: "/v1/agents/{agentId}/expectations", params: agent,
			body: map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": []any{
				exp("inv-99-paid", "99", "tomorrow at nine", "2 hours", ""),
			}}},
		// The MCP endpoint: a tools/call through the same gateway and authorizer.
		{file: "16-mcp-tools-call.json", status: 200, method: "POST", route: "/mcp", headers: map[string]string{"accept": "application/json, text/event-stream"},
			body: map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": "get_expectation",
				"arguments": map[string]any{"agentId": AgentID, "expectationId": Scheduled}}}},
		// The web console: public routes, no token (the page signs in itself).
		{file: "17-console-page.json", status: 200, method: "GET", route: "/console", noAuth: true,
			headers: map[string]string{"accept": "text/html,application/xhtml+xml"}},
		{file: "18-console-asset.json", status: 200, method: "GET", route: "/console/{asset}", noAuth: true,
			params: map[string]string{"asset": "app.js"}, headers: map[string]string{"accept": "*/*"}},
	}
}

// agentCard is an A2A 1.0 card (the shape of a2atest's Card) declaring the
// extension, whose JSON-RPC URL refuses connections (port 9, discard), so
// a lapse task's delivery attempt fails fast and is recorded.
func agentCard() map[string]any {
	return map[string]any{
		"name": "Invoice agent", "description": "Chases invoices until they are paid.", "version": "1.0.0",
		"supportedInterfaces": []any{map[string]any{"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities": map[string]any{"extensions": []any{map[string]any{
			"uri": expect.URI, "description": "Raises expectations on invoices.",
			"params": map[string]any{"keepsTime": false, "lapseSkill": "handle-lapse", "kinds": []any{
				map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "The customer pays the invoice.", "basis": "contract"},
			}},
		}}},
		"defaultInputModes": []string{"text/plain"}, "defaultOutputModes": []string{"text/plain"},
		"skills": []any{
			map[string]any{"id": "handle-lapse", "name": "Handle lapse", "description": "Acts on a lapsed expectation.", "tags": []string{"expectations"}},
			map[string]any{"id": "chase-invoice", "name": "Chase invoice", "description": "Reminds a customer of an unpaid invoice.", "tags": []string{"invoices"}},
		},
	}
}

// signedSeed is the seed ANTICIPATE with its d_dna_signature computed.
func signedSeed(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "internal", "anticipate", "testdata", "seed_anticipate.json"))
	if err != nil {
		t.Fatal(err)
	}
	signed, err := anticipate.Sign(raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anticipate.Validate(signed); err != nil {
		t.Fatalf("signed seed does not validate: %v", err)
	}
	return signed
}
