package awsrt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/otlpin"
	"github.com/agentclock/clockwork/internal/store/dynamo"
)

// TestWriteUnitsPerSpan measures, on the emulator's capacity rules (see
// TestWriteUnitsPerExpectation), what OTLP ingest costs DynamoDB: plans of
// 7 spans each (the agent's root span, a model call, 5 tool calls: 11
// events), exported in one request, then their VERIFYs on the stream. It
// prints the write units and read calls per span and the cost per million
// spans at on-demand list prices (docs/otlp.md, "Cost on AWS"), and fails
// past 11 write units per span (9.0 measured; one commit per event made 12.4, 110 transactions and 260 reads for the same 10 plans).
func TestWriteUnitsPerSpan(t *testing.T) {
	ctx := context.Background()
	capacity := &dynamo.Capacity{}
	counter := &dynamo.Counter{}
	rt := newRuntimeWithTokens(t, time.Now, `{"tokens":[{"token":"t","principal":"p","scopes":["anticipations:write","events:write","read"],"agents":["*"]}]}`,
		counter, dynamo.CapacityMiddleware(capacity))
	drain := streamDrainer(t, rt, 50)
	post := poster(t)
	const plans = 10
	agent, body, spans := tracedPlans(t, post, rt, plans)
	drain()
	capacity.Reset()
	counter.Reset()
	traces := rt.Traces()
	otlpin.Mount(traces, otlpin.Config{})
	post(traces, "/v1/traces", "application/x-protobuf", body)
	n := float64(spans)
	ingest, ingestCalls := capacity.WriteUnits(), counter.Snapshot()
	capacity.Reset()
	counter.Reset()
	drain()
	stream, streamCalls := capacity.WriteUnits(), counter.Snapshot()
	for p := range plans {
		ex, err := rt.Eval.Execution(ctx, agent, fmt.Sprintf("plan-%d", p))
		if err != nil || !ex.Completed || ex.Count != 11 {
			t.Fatalf("plan-%d: %+v %v", p, ex, err)
		}
		vs, err := rt.Eval.Verifications(ctx, fmt.Sprintf("ant-%d", p), agent, evaluation.Caller{May: func(string) bool { return true }})
		if err != nil || len(vs) != 1 {
			t.Fatalf("plan-%d: %d VERIFYs, %v", p, len(vs), err)
		}
	}
	reads := func(c map[string]int) int { return c["GetItem"] + c["Query"] + c["BatchGetItem"] }
	perSpan := (ingest + stream) / n
	readsPerSpan := float64(reads(ingestCalls)+reads(streamCalls)) / n
	t.Logf("%d plans, %.0f spans: ingest %.0f write units %v; stream (VERIFY) %.0f write units %v", plans, n, ingest, ingestCalls, stream, streamCalls)
	t.Logf("per span: %.1f write units, %.1f read calls; per million spans: $%.2f of writes and at most $%.2f of reads (a read call of up to 4 KB is 1 unit)",
		perSpan, readsPerSpan, perSpan*0.625, readsPerSpan*0.125)
	if perSpan > 11 {
		t.Errorf("%.1f write units per span, over 11", perSpan)
	}
}

// tracedPlans declares an ANTICIPATE (the seed's) for each of plans plans
// and returns the agent and one OTLP/protobuf export of their traces (7
// spans each: the agent's root span, a model call, 5 tool calls).
func tracedPlans(t *testing.T, post func(h http.Handler, path, ct string, body []byte), rt *Runtime, plans int) (agent string, body []byte, spans int) {
	t.Helper()
	seed, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	for p := range plans {
		var m map[string]any
		_ = json.Unmarshal(seed, &m)
		m["anticipation_id"], m["plan_id"] = fmt.Sprintf("ant-%d", p), fmt.Sprintf("plan-%d", p)
		m["scope_envelope_id"], m["session_id"] = fmt.Sprintf("scope-%d", p), fmt.Sprintf("conv-%d", p)
		agent = m["agent_id"].(string)
		b, _ := json.Marshal(m)
		signed, err := anticipate.Sign(b)
		if err != nil {
			t.Fatal(err)
		}
		post(rt.HTTP(), "/v1/anticipations", "application/json", signed)
	}
	str := func(k, v string) *commonv1.KeyValue {
		return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
	}
	var all []*tracev1.Span
	start := uint64(time.Now().Add(-time.Hour).UnixNano())
	for p := range plans {
		tid := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, 0x5eed), uint64(p+1))
		sid := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(p)<<8|uint64(i+1)) }
		plan := fmt.Sprintf("plan-%d", p)
		all = append(all, &tracev1.Span{TraceId: tid, SpanId: sid(1), ParentSpanId: sid(0), Name: "chat gpt-4o", StartTimeUnixNano: start, EndTimeUnixNano: start + 1e8,
			Attributes: []*commonv1.KeyValue{str("gen_ai.operation.name", "chat"), str("gen_ai.request.model", "gpt-4o"), str("aigp.plan_id", plan)}})
		for i, tool := range []string{"search_flights", "book_flight", "search_hotels", "book_hotel", "send_itinerary"} {
			s := start + uint64(i+2)*1e8
			all = append(all, &tracev1.Span{TraceId: tid, SpanId: sid(2 + i), ParentSpanId: sid(0), Name: "execute_tool " + tool, StartTimeUnixNano: s, EndTimeUnixNano: s + 5e7,
				Attributes: []*commonv1.KeyValue{str("gen_ai.operation.name", "execute_tool"), str("gen_ai.tool.name", tool),
					str("gen_ai.tool.call.arguments", fmt.Sprintf(`{"trip":"trip-%d","passengers":1}`, p)), str("aigp.plan_id", plan)}})
		}
		all = append(all, &tracev1.Span{TraceId: tid, SpanId: sid(0), Name: "invoke_agent travel-agent", StartTimeUnixNano: start, EndTimeUnixNano: start + 1e9,
			Attributes: []*commonv1.KeyValue{str("gen_ai.operation.name", "invoke_agent"), str("aigp.plan_id", plan),
				{Key: "aigp.plan_root", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: true}}}}})
	}
	body, _ = proto.Marshal(&tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{
		Resource:   &resourcev1.Resource{Attributes: []*commonv1.KeyValue{str("gen_ai.agent.id", agent)}},
		ScopeSpans: []*tracev1.ScopeSpans{{Spans: all}}}}})
	return agent, body, len(all)
}

// poster returns a function that POSTs a body with the bearer token t and
// fails the test unless the answer is 2xx (and, for OTLP/protobuf, empty:
// no partial success).
func poster(t *testing.T) func(h http.Handler, path, ct string, body []byte) {
	return func(h http.Handler, path, ct string, body []byte) {
		t.Helper()
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Content-Type", ct)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code/100 != 2 || ct == "application/x-protobuf" && w.Body.Len() > 0 {
			t.Fatalf("%s: %d %q", path, w.Code, w.Body.Bytes())
		}
	}
}
