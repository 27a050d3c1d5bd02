package mcpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/httpapi"
	"github.com/agentclock/clockwork/internal/mcpapi"
)

const (
	adminToken  = "admin-token"
	readerToken = "reader-token"
	agentID     = "agent-1"
)

// nullSender stands for lapse delivery: nothing leaves the process.
type nullSender struct{}

func (nullSender) Send(context.Context, expect.Card, a2aout.Message) (string, error) {
	return "", errors.New("delivery is off in this test")
}

func startServer(t testing.TB) (*app.App, *httptest.Server) {
	t.Helper()
	a, err := auth.New([]auth.TokenSpec{
		{Token: adminToken, Principal: "admin", Scopes: auth.AllScopes, Agents: []string{"*"}},
		{Token: readerToken, Principal: "reader", Scopes: []auth.Scope{auth.Read}, Agents: []string{"*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ap, err := app.Start(app.Config{DataDir: t.TempDir(), Auth: a, NoSync: true, Sender: nullSender{},
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ap.Handler)
	t.Cleanup(func() { srv.Close(); _ = ap.Close() })
	card, err := os.ReadFile("../../examples/card.json")
	if err != nil {
		t.Fatal(err)
	}
	if st, body := httpDo(t, srv, "PUT", "/v1/agents/"+agentID, adminToken, string(card)); st != 200 {
		t.Fatalf("card: %d %s", st, body)
	}
	return ap, srv
}

func httpDo(t testing.TB, srv *httptest.Server, method, path, token, body string) (int, []byte) {
	t.Helper()
	return httpDoHeaders(t, srv, method, path, token, body, nil)
}

func httpDoHeaders(t testing.TB, srv *httptest.Server, method, path, token, body string, headers map[string]string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t testing.TB, srv *httptest.Server, token string) *mcp.ClientSession {
	return connectVia(t, srv, bearer(token))
}

func connectVia(t testing.TB, srv *httptest.Server, rt http.RoundTripper) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func raiseArgs(id string) map[string]any {
	return map[string]any{"agentId": agentID, "taskId": "task-1", "contextId": "ctx-1", "expectations": []any{map[string]any{
		"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": "42"}, "expects": "invoice 42 is paid",
		"satisfiedBy": map[string]any{"factKey": "invoice.42.paid"}, "dueAt": expect.FormatTime(time.Now().Add(time.Hour)), "basis": "contract"}}}
}

func resolved(t *testing.T, schema any) *jsonschema.Resolved {
	t.Helper()
	b, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("schema %s: %v", b, err)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("schema %s does not resolve: %v", b, err)
	}
	return r
}

func valid(t *testing.T, r *jsonschema.Resolved, v any) error {
	t.Helper()
	b, _ := json.Marshal(v)
	var x any
	_ = json.Unmarshal(b, &x)
	return r.Validate(x)
}

// TestToolsAgainstTheirSchemas lists the tools with the SDK's client and,
// for each, checks that a valid call's arguments satisfy the advertised
// input schema and its structured result the advertised output schema,
// and that arguments the route would refuse are refused by the schema too.
func TestToolsAgainstTheirSchemas(t *testing.T) {
	_, srv := startServer(t)
	cs := connect(t, srv, adminToken)
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	for _, tl := range list.Tools {
		tools[tl.Name] = tl
	}
	if len(tools) != 17 {
		t.Fatalf("%d tools: %v", len(tools), tools)
	}
	calls := []struct {
		tool string
		args any
		bad  any // arguments the schema must refuse, as the route does
	}{
		{"raise_expectations", raiseArgs("e-1"), map[string]any{"agentId": agentID, "taskId": "t", "expectations": []any{}}},
		{"report_facts", map[string]any{"agentId": agentID, "facts": []any{map[string]any{"factKey": "invoice.42.paid", "observedAt": expect.FormatTime(time.Now())}}},
			map[string]any{"agentId": agentID, "facts": []any{map[string]any{"factKey": "k"}}}},
		{"get_expectation", map[string]any{"agentId": agentID, "expectationId": "e-1"}, map[string]any{"agentId": agentID}},
		{"list_expectations", map[string]any{"agentId": agentID, "state": "satisfied", "limit": 10}, map[string]any{"agentId": agentID, "colour": "red"}},
		{"raise_expectations", raiseArgs("e-2"), nil},
		{"withdraw_expectations", map[string]any{"agentId": agentID, "withdraw": []string{"e-2"}}, map[string]any{"agentId": agentID, "withdraw": "e-2"}},
		{"put_heartbeat", map[string]any{"agentId": agentID, "name": "nightly", "kind": "payment", "cron": "0 2 * * *", "timezone": "Europe/Riga", "grace": "PT1H"},
			map[string]any{"agentId": agentID, "name": "nightly", "kind": "payment", "every": 300}},
		{"ping_heartbeat", map[string]any{"agentId": agentID, "name": "nightly"}, map[string]any{"agentId": agentID}},
		{"get_heartbeat", map[string]any{"agentId": agentID, "name": "nightly"}, map[string]any{"agentId": agentID, "name": 7}},
		{"fail_heartbeat", map[string]any{"agentId": agentID, "name": "nightly"}, nil},
		{"list_heartbeats", map[string]any{"agentId": agentID}, map[string]any{"agentId": agentID, "limit": "ten"}},
		{"start_evaluation", map[string]any{"filter": map[string]any{"agentId": agentID}, "criteria": []any{map[string]any{"criterion_id": "c",
			"description": "few steps", "measurement": "DETERMINISTIC", "assertion": "step_count <= 3", "weight": 1, "category": "trajectory"}},
			"gradingPolicy": map[string]any{"grader_type": "CODE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": true}},
			map[string]any{"filter": map[string]any{"agentId": agentID}, "criteria": []any{map[string]any{"criterion_id": "c", "category": "side"}}}},
		{"get_evaluation", map[string]any{"evaluationId": "{started}"}, map[string]any{"evaluationId": "e", "limit": "all"}},
	}
	started := ""
	for _, c := range calls {
		tl := tools[c.tool]
		if tl == nil {
			t.Fatalf("no tool %s", c.tool)
		}
		in, out := resolved(t, tl.InputSchema), resolved(t, tl.OutputSchema)
		if err := valid(t, in, c.args); err != nil {
			t.Errorf("%s: valid arguments fail the input schema: %v", c.tool, err)
		}
		if c.bad != nil && valid(t, in, c.bad) == nil {
			t.Errorf("%s: the input schema accepts %v", c.tool, c.bad)
		}
		if m, ok := c.args.(map[string]any); ok && m["evaluationId"] == "{started}" {
			m["evaluationId"] = started
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %v", c.tool, err, res)
		}
		if c.tool == "start_evaluation" {
			started, _ = res.StructuredContent.(map[string]any)["evaluationId"].(string)
		}
		if err := valid(t, out, res.StructuredContent); err != nil {
			t.Errorf("%s: the result fails the output schema: %v", c.tool, err)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; !json.Valid([]byte(text)) {
			t.Errorf("%s: text content is not the JSON result: %s", c.tool, text)
		}
	}
	// The raw messages: schemas from the OpenAPI document.
	ant := tools["declare_anticipation"]
	if defs := ant.InputSchema.(map[string]any)["$defs"].(map[string]any); defs["Criterion"] == nil || defs["GradingPolicy"] == nil {
		t.Errorf("declare_anticipation's schema lacks the components it refers to: %v", defs)
	}
	seed, err := readSeed()
	if err != nil {
		t.Fatal(err)
	}
	if err := valid(t, resolved(t, ant.InputSchema), json.RawMessage(seed)); err != nil {
		t.Errorf("the seed's ANTICIPATE fails declare_anticipation's schema: %v", err)
	}
	ev := tools["append_execution_event"]
	evIn := resolved(t, ev.InputSchema)
	good := map[string]any{"planId": "p", "event": map[string]any{"message_type": "TOOL_REQUEST", "event_id": "e", "timestamp": "2026-01-01T00:00:00Z", "tool": "t", "trace": "kept"}}
	if err := valid(t, evIn, good); err != nil {
		t.Errorf("append_execution_event: %v", err)
	}
	if valid(t, evIn, map[string]any{"planId": "p", "event": map[string]any{"message_type": "NAP", "event_id": "e", "timestamp": "2026-01-01T00:00:00Z"}}) == nil {
		t.Errorf("append_execution_event's schema accepts an unknown message_type")
	}
}

// readSeed returns the seed's ANTICIPATE, signed.
func readSeed() ([]byte, error) {
	b, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		return nil, err
	}
	return anticipate.Sign(b)
}

// TestSchemasAreTheRoutes checks that each typed tool's input schema,
// inferred from the Go type its route decodes, has the members and
// required members of the route's OpenAPI body schema (and query or path
// parameters), member for member down to the leaves: the two descriptions
// of one contract cannot drift apart.
func TestSchemasAreTheRoutes(t *testing.T) {
	ap, _ := startServer(t)
	var doc map[string]any
	if err := json.Unmarshal(httpapi.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for _, tl := range ap.Handler.Tools() {
		if _, raw := tl.Components[""]; raw {
			continue // the component itself (TestToolsAgainstTheirSchemas)
		}
		s, err := mcpapi.InputSchema(tl)
		if err != nil {
			t.Fatalf("%s: %v", tl.Name, err)
		}
		var got map[string]any
		b, _ := json.Marshal(s)
		_ = json.Unmarshal(b, &got)
		method, path, _ := strings.Cut(tl.Route, " ")
		op := doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
		want := map[string]any{"type": "object", "properties": map[string]any{}, "required": []any{}}
		props, req := want["properties"].(map[string]any), []any{}
		for _, p := range asList(op["parameters"]) {
			p := p.(map[string]any)
			props[p["name"].(string)] = p["schema"]
			if p["required"] == true {
				req = append(req, p["name"])
			}
		}
		if rb, ok := op["requestBody"].(map[string]any); ok {
			body := deref(comps, rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"])
			if _, whole := tl.Components["event"]; whole {
				props["event"] = body
				req = append(req, "event")
			} else {
				for k, v := range body["properties"].(map[string]any) {
					props[k] = v
				}
				req = append(req, asList(body["required"])...)
			}
		}
		want["required"] = req
		sameShape(t, tl.Name, comps, got, want)
	}
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func deref(comps map[string]any, v any) map[string]any {
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		name := ref[strings.LastIndex(ref, "/")+1:]
		return deref(comps, comps[name])
	}
	return m
}

// sameShape compares the member names and required lists of two object
// schemas, recursively through items and properties; $refs of got point at
// its $defs, those of want at the OpenAPI components.
func sameShape(t *testing.T, at string, comps map[string]any, got, want map[string]any) {
	t.Helper()
	want = deref(comps, want)
	if ref, ok := got["$ref"].(string); ok {
		// A component shared with the OpenAPI document: the same by construction.
		if name := ref[strings.LastIndex(ref, "/")+1:]; comps[name] == nil || !strings.HasSuffix(ref, name) {
			t.Errorf("%s: $ref %s is not an OpenAPI component", at, ref)
		}
		return
	}
	if items, ok := want["items"]; ok {
		gi, _ := got["items"].(map[string]any)
		if gi == nil {
			t.Errorf("%s: an array in the document, not in the tool's schema", at)
			return
		}
		sameShape(t, at+"[]", comps, gi, deref(comps, items))
		return
	}
	wp, _ := want["properties"].(map[string]any)
	if wp == nil {
		return
	}
	gp, _ := got["properties"].(map[string]any)
	if !slices.Equal(keys(gp), keys(wp)) {
		t.Errorf("%s: members %v, the route's %v", at, keys(gp), keys(wp))
		return
	}
	if g, w := strs(got["required"]), strs(want["required"]); !slices.Equal(g, w) {
		t.Errorf("%s: required %v, the route's %v", at, g, w)
	}
	for k := range wp {
		sameShape(t, at+"."+k, comps, gp[k].(map[string]any), deref(comps, wp[k]))
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func strs(v any) []string {
	var out []string
	for _, x := range asList(v) {
		out = append(out, x.(string))
	}
	sort.Strings(out)
	return out
}

// TestTransport checks what the HTTP layer adds around the SDK: GET is 405
// (stateless: no event stream), a client that sends neither Accept value
// still gets JSON, a body that is not JSON is a 400 problem, and a
// long-lived subscriptions/listen is refused.
func TestTransport(t *testing.T) {
	_, srv := startServer(t)
	if st, body := httpDo(t, srv, "GET", "/mcp", adminToken, ""); st != 405 || !bytes.Contains(body, []byte("POST only")) {
		t.Errorf("GET /mcp: %d %s", st, body)
	}
	st, body := httpDo(t, srv, "POST", "/mcp", adminToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if st != 200 || !bytes.Contains(body, []byte(`"raise_expectations"`)) {
		t.Errorf("tools/list without Accept: %d %s", st, body)
	}
	if st, body := httpDo(t, srv, "POST", "/mcp", adminToken, `{"jsonrpc":`); st != 400 || !bytes.Contains(body, []byte("malformed JSON")) {
		t.Errorf("malformed: %d %s", st, body)
	}
	if st, body := httpDo(t, srv, "POST", "/mcp", adminToken, `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`); st != 400 {
		t.Errorf("subscriptions/listen: %d %s", st, body)
	}
	if st, body := httpDo(t, srv, "POST", "/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); st != 401 {
		t.Errorf("no token: %d %s", st, body)
	}
	// The scope challenge names the tool's scope.
	req, _ := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"report_facts","arguments":{"agentId":"agent-1","facts":[]}}}`))
	req.Header.Set("Authorization", "Bearer "+readerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="insufficient_scope", scope="facts:write"`) {
		t.Errorf("reader calling report_facts: %d, WWW-Authenticate %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	// Arguments are bounded like the route's body, naming them.
	deep := strings.Repeat(`{"a":`, 33) + "1" + strings.Repeat("}", 33)
	st, body = httpDo(t, srv, "POST", "/mcp", adminToken, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"declare_anticipation","arguments":`+deep+`}}`)
	if st != 200 || !bytes.Contains(body, []byte(`"isError":true`)) || !bytes.Contains(body, []byte(`nested too deeply`)) {
		t.Errorf("arguments nested 33 deep: %d %s", st, body)
	}
}

// BenchmarkRoundTrip measures one read of an expectation over loopback,
// through the MCP endpoint with the SDK's client (tools/call
// get_expectation: one POST, JSON answer) and through its HTTP route (GET),
// on the embedded store.
func BenchmarkRoundTrip(b *testing.B) {
	_, srv := startServer(b)
	posts := 0
	cs := connectVia(b, srv, counting{bearer(adminToken), &posts})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "raise_expectations", Arguments: raiseArgs("bench-1")})
	if err != nil || res.IsError {
		b.Fatal(err, res)
	}
	args := map[string]any{"agentId": agentID, "expectationId": "bench-1"}
	b.Run("mcp", func(b *testing.B) {
		posts = 0
		for b.Loop() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_expectation", Arguments: args})
			if err != nil || res.IsError {
				b.Fatal(err, res)
			}
		}
		b.ReportMetric(float64(posts)/float64(b.N), "requests/op")
	})
	b.Run("mcp-plain-client", func(b *testing.B) {
		// The same tools/call posted by a plain HTTP client: the endpoint's
		// own cost, without the SDK client's.
		client := &http.Client{Transport: bearer(adminToken)}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_expectation","arguments":{"agentId":"` + agentID + `","expectationId":"bench-1"}}}`
		for b.Loop() {
			resp, err := client.Post(srv.URL+"/mcp", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || bytes.Contains(out, []byte(`"isError":true`)) {
				b.Fatal(resp.Status, string(out))
			}
		}
	})
	b.Run("http", func(b *testing.B) {
		client := &http.Client{Transport: bearer(adminToken)}
		for b.Loop() {
			resp, err := client.Get(srv.URL + "/v1/agents/" + agentID + "/expectations/bench-1")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
}

// counting counts the requests a client sends (one at a time here: the
// benchmark's calls are sequential, and the endpoint offers no stream).
type counting struct {
	base http.RoundTripper
	n    *int
}

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	*c.n++
	return c.base.RoundTrip(r)
}
