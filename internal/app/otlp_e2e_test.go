package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// trajectoryAnticipation is the seed's ANTICIPATE graded on the tool
// trajectory only: the right tools in order, the user created with the
// right arguments, no error, never iam_remove_user.
func trajectoryAnticipation(t *testing.T, antID, planID, session string) []byte {
	return variant(t, antID, planID, func(m map[string]any) {
		m["session_id"] = session
		m["expectations"] = map[string]any{
			"outcome_criteria": []any{
				map[string]any{"criterion_id": "oc-args", "description": "alice is the user created", "measurement": "DETERMINISTIC",
					"assertion": "tool_args('iam_create_user')[0].username == 'alice'", "weight": 1},
			},
			"trajectory_criteria": []any{
				map[string]any{"criterion_id": "tc-order", "description": "create, then add to the group", "measurement": "DETERMINISTIC",
					"assertion": "trajectory_in_order(['iam_create_user', 'iam_add_to_group'])", "weight": 1},
				map[string]any{"criterion_id": "tc-f1", "description": "the expected tools", "measurement": "DETERMINISTIC",
					"assertion": "tool_call_f1(['iam_create_user', 'iam_add_to_group']) >= 0.8", "weight": 1},
				map[string]any{"criterion_id": "tc-errors", "description": "no tool failed", "measurement": "DETERMINISTIC",
					"assertion": "error_count == 0", "weight": 0.5},
			},
			"anti_criteria": []any{
				map[string]any{"criterion_id": "ac-remove", "description": "never removes a user", "measurement": "DETERMINISTIC",
					"assertion": "trajectory_any_order(['iam_remove_user']) == false", "weight": 1},
			},
		}
	})
}

// tracedAgent runs one agent turn instrumented as a GenAI framework is:
// an invoke_agent root span (marked aigp.plan_root) and one execute_tool
// span per call, recorded (so a test can export them again) and exported
// with the official OTLP/HTTP exporter, gzip-compressed.
func tracedAgent(t *testing.T, e *testEnv, agent, conversation, plan string, tools []string, failing string) []sdktrace.ReadOnlySpan {
	t.Helper()
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(e.srv.URL+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + adminToken}),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression),
		// As exporters are deployed: a 429 or 503 is sent again (the AWS
		// mode's emulator throttles; a span lost to one would leave its
		// plan without PLAN_COMPLETE), with short waits for the test.
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: time.Second, MaxElapsedTime: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	res := resource.NewSchemaless(attribute.String("service.name", "onboarding-agent"), attribute.String("gen_ai.agent.id", agent))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(res))
	tr := tp.Tracer("github.com/example/onboarding")
	common := []attribute.KeyValue{}
	if conversation != "" {
		common = append(common, attribute.String("gen_ai.conversation.id", conversation))
	}
	if plan != "" {
		common = append(common, attribute.String("aigp.plan_id", plan))
	}
	rctx, root := tr.Start(ctx, "invoke_agent onboarding", trace.WithAttributes(append(common,
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.Bool("aigp.plan_root", true))...))
	for _, tool := range tools {
		_, sp := tr.Start(rctx, "execute_tool "+tool, trace.WithAttributes(append(common,
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", tool),
			attribute.String("gen_ai.tool.call.id", "call-"+tool), attribute.String("gen_ai.tool.call.arguments", `{"username":"alice"}`))...))
		time.Sleep(2 * time.Millisecond)
		if tool == failing {
			sp.SetStatus(codes.Error, "denied")
		}
		sp.End()
	}
	// The outcome, reported on a span of its own.
	_, out := tr.Start(rctx, "report outcome", trace.WithAttributes(append(common,
		attribute.String("aigp.message_type", "OUTCOME"), attribute.String("aigp.variables", `{"target_username":"alice"}`))...))
	out.End()
	root.End()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("export: %v", err)
	}
	return rec.Ended()
}

// scenarioOTLPTraces: an agent instrumented with the OpenTelemetry SDK is
// graded from its traces alone: PASS and FAIL by trajectory criteria, one
// plan bound by its conversation id alone; a batch exported twice appends
// nothing new; a failing tool span counts in error_count; spans bound to
// no plan come back in partial_success (OTLP JSON, hex ids).
func scenarioOTLPTraces(t *testing.T) {
	e := startEnv(t)
	var seed map[string]any
	_ = json.Unmarshal(variant(t, "x", "x"), &seed)
	agent := seed["agent_id"].(string)
	registerAs(t, e, agent)

	// PASS, bound by gen_ai.conversation.id alone (no aigp.plan_id).
	e.must(201, e.call("POST", "/v1/anticipations", trajectoryAnticipation(t, "ant-otel-pass", "plan-otel-pass", "conv-pass")))
	spans := tracedAgent(t, e, agent, "conv-pass", "", []string{"iam_create_user", "iam_add_to_group"}, "")
	v := e.waitVerification("ant-otel-pass")
	if v.Verdict != anticipate.VerdictPass {
		t.Fatalf("verdict %s: %+v", v.Verdict, v.Results)
	}
	var page struct {
		Execution struct{ Count int }
		Events    []struct {
			Event map[string]any `json:"event"`
		}
	}
	e.must(200, e.call("GET", "/v1/executions/plan-otel-pass/events", nil)).json(t, &page)
	if page.Execution.Count != 6 { // 2 tools x (request, result) + OUTCOME + PLAN_COMPLETE
		t.Fatalf("events: %d", page.Execution.Count)
	}
	last := page.Events[len(page.Events)-1].Event
	if last["message_type"] != "PLAN_COMPLETE" || last["trace_id"] == "" || page.Events[0].Event["span_id"] == nil {
		t.Fatalf("events %+v", page.Events)
	}

	// The same batch exported again: nothing new, nothing rejected.
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(e.srv.URL+"/v1/traces"),
		otlptracehttp.WithHeaders(map[string]string{"Authorization": "Bearer " + adminToken}))
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.ExportSpans(ctx, spans); err != nil {
		t.Fatalf("export again: %v", err)
	}
	e.must(200, e.call("GET", "/v1/executions/plan-otel-pass/events", nil)).json(t, &page)
	if page.Execution.Count != 6 {
		t.Fatalf("a re-exported batch appended events: %d", page.Execution.Count)
	}

	// FAIL, bound by aigp.plan_id: the forbidden tool, and an ERROR span.
	e.must(201, e.call("POST", "/v1/anticipations", trajectoryAnticipation(t, "ant-otel-fail", "plan-otel-fail", "conv-fail")))
	tracedAgent(t, e, agent, "", "plan-otel-fail", []string{"iam_create_user", "iam_remove_user"}, "iam_remove_user")
	v = e.waitVerification("ant-otel-fail")
	if v.Verdict != anticipate.VerdictFail || len(v.AntiCriteriaFailed) != 1 || v.AntiCriteriaFailed[0] != "ac-remove" {
		t.Fatalf("verdict %s, anti %v", v.Verdict, v.AntiCriteriaFailed)
	}
	for _, r := range v.Results {
		if r.CriterionID == "tc-errors" && r.Status != anticipate.StatusFail {
			t.Fatalf("the ERROR span is not in error_count: %+v", r)
		}
	}

	// OTLP JSON: a span bound to no plan is reported, not an error.
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"gen_ai.agent.id","value":{"stringValue":"` + agent + `"}}]},
	  "scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"execute_tool lookup",
	  "startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000001000000000",
	  "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.name","value":{"stringValue":"lookup"}}]}]}]}]}`
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/traces", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var ans struct {
		PartialSuccess struct {
			RejectedSpans string
			ErrorMessage  string
		}
	}
	_ = json.Unmarshal(out, &ans)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || ans.PartialSuccess.RejectedSpans != "1" ||
		!strings.Contains(ans.PartialSuccess.ErrorMessage, "no plan") {
		t.Fatalf("unbound span: %d %s", resp.StatusCode, out)
	}
	// The agent named on the root span only (as GenAI frameworks do):
	// every event of the plan is its agent's, PLAN_COMPLETE last.
	e.must(201, e.call("POST", "/v1/anticipations", trajectoryAnticipation(t, "ant-otel-root", "plan-otel-root", "conv-root")))
	rootBody := `{"resourceSpans":[{"scopeSpans":[{"spans":[
	  {"traceId":"6b8efff798038103d269b633813fc60c","spanId":"00000000000000ff","name":"invoke_agent","startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000009000000000",
	   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"invoke_agent"}},{"key":"aigp.plan_root","value":{"boolValue":true}},
	     {"key":"gen_ai.agent.id","value":{"stringValue":"` + agent + `"}},{"key":"aigp.plan_id","value":{"stringValue":"plan-otel-root"}}]},
	  {"traceId":"6b8efff798038103d269b633813fc60c","spanId":"0000000000000001","parentSpanId":"00000000000000ff","name":"execute_tool","startTimeUnixNano":"1700000001000000000","endTimeUnixNano":"1700000002000000000",
	   "attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.name","value":{"stringValue":"iam_create_user"}},
	     {"key":"aigp.plan_id","value":{"stringValue":"plan-otel-root"}}]}]}]}]}`
	req, _ = http.NewRequest("POST", e.srv.URL+"/v1/traces", strings.NewReader(rootBody))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	if r := e.do(req); r.status != 200 || string(r.body) != "{}" {
		t.Fatalf("root-named agent: %d %s", r.status, r.body)
	}
	page.Events = nil // a fresh decode: json merges into maps it reuses
	e.must(200, e.call("GET", "/v1/executions/plan-otel-root/events", nil)).json(t, &page)
	if page.Execution.Count != 3 || page.Events[2].Event["message_type"] != "PLAN_COMPLETE" || page.Events[2].Event["parent_span_id"] != nil ||
		page.Events[0].Event["parent_span_id"] != "00000000000000ff" {
		t.Fatalf("root-named agent's plan: %d events %+v", page.Execution.Count, page.Events)
	}
	// Millions of empty spans in a small body are refused before decoding.
	bomb := `{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.Repeat(`{},`, 6000) + `{}]}]}]}`
	req, _ = http.NewRequest("POST", e.srv.URL+"/v1/traces", strings.NewReader(bomb))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	if r := e.do(req); r.status != 413 {
		t.Fatalf("6,001 spans: %d %s", r.status, r.body)
	}
	// A span past a limit (here 200 attributes; 128 by default) is refused
	// by name in the partial success, before it is decoded; the request's
	// other spans are taken.
	wide := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060709","name":"wide","attributes":[` +
		strings.Repeat(`{"key":"k","value":{"stringValue":"v"}},`, 199) + `{}]}]}]}]}`
	if r := e.must(200, e.call("POST", "/v1/traces", wide)); !strings.Contains(string(r.body), `"rejectedSpans":"1"`) || !strings.Contains(string(r.body), "more than 128 attributes") {
		t.Fatalf("a span of 200 attributes: %s", r.body)
	}
	// A body that is not a request, and one of another content type.
	for _, c := range []struct{ ct, body, field string }{{"application/json", "{", "body"}, {"application/x-protobuf", "\xff\xff", "body"}, {"text/plain", "x", "Content-Type"}} {
		req, _ := http.NewRequest("POST", e.srv.URL+"/v1/traces", bytes.NewReader([]byte(c.body)))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		req.Header.Set("Content-Type", c.ct)
		r := e.do(req)
		if r.status != 400 || !strings.Contains(string(r.body), `"path":"`+c.field+`"`) {
			t.Fatalf("%s %q: %d %s", c.ct, c.body, r.status, r.body)
		}
	}
	// OTLP/JSON is JSON: a span name with bytes that are not UTF-8 is a
	// 400 naming where, not a name stored with U+FFFD in it.
	badName := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"tool \xff call"}]}]}]}`
	req, _ = http.NewRequest("POST", e.srv.URL+"/v1/traces", strings.NewReader(strings.Replace(badName, `\xff`, "\xff", 1)))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	if r := e.do(req); r.status != 400 || !strings.Contains(string(r.body), "UTF-8") || !strings.Contains(string(r.body), "resourceSpans[0].scopeSpans[0].spans[0].name") {
		t.Fatalf("a span name that is not UTF-8: %d %s", r.status, r.body)
	}
	// Another tenant's token: its spans naming this agent are rejected.
	req, _ = http.NewRequest("POST", e.srv.URL+"/v1/traces", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tenantB)
	req.Header.Set("Content-Type", "application/json")
	r := e.do(req)
	if r.status != 200 || !strings.Contains(string(r.body), "may not act for agent") {
		t.Fatalf("another tenant's spans: %d %s", r.status, r.body)
	}
}

// TestPythonOTelAgent: an agent instrumented with the OpenTelemetry Python
// SDK (OpenInference TOOL spans, the OTLP/HTTP protobuf exporter,
// configured by the standard environment variables alone) is graded PASS
// from its trace, its plan bound by the conversation id.
func TestPythonOTelAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: installs the OpenTelemetry Python SDK into a cached virtualenv on first use")
	}
	const dir = "../../examples/otel/python"
	python := strings.TrimSpace(installTool(t, "bash", dir+"/venv.sh", "python"))
	e := startEnv(t)
	var seed map[string]any
	_ = json.Unmarshal(variant(t, "x", "x"), &seed)
	agent := seed["agent_id"].(string)
	registerAs(t, e, agent)
	e.must(201, e.call("POST", "/v1/anticipations", trajectoryAnticipation(t, "ant-py-otel", "plan-py-otel", "conv-py")))
	cmd := exec.Command(python, dir+"/agent.py", "conv-py", agent, "iam_create_user", "iam_add_to_group")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="+e.srv.URL+"/v1/traces",
		"OTEL_EXPORTER_OTLP_TRACES_HEADERS=Authorization=Bearer%20"+adminToken)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("agent.py: %v\n%s", err, out)
	}
	v := e.waitVerification("ant-py-otel")
	if v.Verdict != anticipate.VerdictPass {
		t.Fatalf("verdict %s: %+v", v.Verdict, v.Results)
	}
}
