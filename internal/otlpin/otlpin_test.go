package otlpin

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
)

func kv(k, v string) *commonv1.KeyValue {
	return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
}

func id(s string) []byte { b, _ := hex.DecodeString(s); return b }

// TestMap: the mapping table, ids and times checked, and a plan's events
// ordered with PLAN_COMPLETE last.
func TestMap(t *testing.T) {
	tool := func(spanID string, start uint64, status tracev1.Status_StatusCode) *tracev1.Span {
		return &tracev1.Span{TraceId: id("5b8efff798038103d269b633813fc60c"), SpanId: id(spanID), StartTimeUnixNano: start, EndTimeUnixNano: start + 10,
			Status:     &tracev1.Status{Code: status},
			Attributes: []*commonv1.KeyValue{kv("gen_ai.operation.name", "execute_tool"), kv("gen_ai.tool.name", "t-"+spanID[14:]), kv("gen_ai.tool.call.arguments", `{"a":1}`)}}
	}
	root := &tracev1.Span{TraceId: id("5b8efff798038103d269b633813fc60c"), SpanId: id("00000000000000ff"), StartTimeUnixNano: 1, EndTimeUnixNano: 5,
		Attributes: []*commonv1.KeyValue{kv("gen_ai.operation.name", "invoke_agent"), {Key: "aigp.plan_root", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_BoolValue{BoolValue: true}}}}}
	oi := &tracev1.Span{TraceId: id("5b8efff798038103d269b633813fc60c"), SpanId: id("00000000000000aa"), StartTimeUnixNano: 3, EndTimeUnixNano: 4,
		Attributes: []*commonv1.KeyValue{kv("openinference.span.kind", "TOOL"), kv("tool.name", "lookup"), kv("error.type", "timeout")}}
	bad := &tracev1.Span{TraceId: id("ab"), SpanId: id("cd"), Attributes: []*commonv1.KeyValue{kv("gen_ai.operation.name", "execute_tool")}}
	late := tool("0000000000000003", 1<<63, tracev1.Status_STATUS_CODE_UNSET)
	td := &tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{ScopeSpans: []*tracev1.ScopeSpans{{Spans: []*tracev1.Span{
		root, tool("0000000000000002", 2, tracev1.Status_STATUS_CODE_ERROR), oi, bad, late, {TraceId: root.TraceId, SpanId: id("0000000000000009"), Name: "other"}}}}}}}
	got := Map(td)
	if len(got) != 5 { // the span that maps to no event is left out
		t.Fatalf("%d span results", len(got))
	}
	if got[3].Invalid == "" || got[4].Invalid == "" {
		t.Fatalf("bad ids and times accepted: %+v %+v", got[3], got[4])
	}
	var evs []Event
	for _, se := range got[:3] {
		evs = append(evs, se.Events...)
	}
	Order(evs)
	var seq []string
	for _, e := range evs {
		seq = append(seq, e.Body["message_type"].(string)+":"+str2(e.Body["tool"])+":"+str2(e.Body["status"]))
	}
	// By time (t-02 runs from 2 to 12, lookup from 3 to 4), PLAN_COMPLETE last.
	want := "TOOL_REQUEST:t-02:,TOOL_REQUEST:lookup:,TOOL_RESULT:lookup:ERROR,TOOL_RESULT:t-02:ERROR,PLAN_COMPLETE::"
	if strings.Join(seq, ",") != want {
		t.Fatalf("events\n got %s\nwant %s", strings.Join(seq, ","), want)
	}
	if evs[0].Body["event_id"] != "otel-5b8efff798038103d269b633813fc60c-0000000000000002-req" || evs[0].Body["arguments"] == nil {
		t.Fatalf("first event %v", evs[0].Body)
	}
	if !bytes.Equal(id(evs[0].Body["trace_id"].(string)), root.TraceId) {
		t.Fatal("trace id not kept")
	}
}

func str2(v any) string { s, _ := v.(string); return s }

// TestResponse: partial success in protobuf decodes as the OTLP message
// does (field 1 message, rejected_spans 1, error_message 2).
func TestResponse(t *testing.T) {
	if len(Response(0, "", false)) != 0 || string(Response(0, "", true)) != "{}" {
		t.Fatal("an export without rejections answers an empty message")
	}
	b := Response(3, "why", false)
	want := []byte{0x0a, 0x07, 0x08, 0x03, 0x12, 0x03, 'w', 'h', 'y'}
	if !bytes.Equal(b, want) {
		t.Fatalf("%x, want %x", b, want)
	}
}
