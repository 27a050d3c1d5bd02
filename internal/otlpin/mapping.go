package otlpin

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
)

// The attributes read (GenAI semantic conventions, OpenInference, and
// clockwork's aigp.* for what the conventions do not say).
const (
	AttrPlanID         = "aigp.plan_id"
	AttrAgentID        = "aigp.agent_id"
	AttrMessageType    = "aigp.message_type"
	AttrVariables      = "aigp.variables"
	AttrObservations   = "aigp.observations"
	AttrPlanRoot       = "aigp.plan_root"
	AttrGenAIOperation = "gen_ai.operation.name"
	AttrGenAIAgentID   = "gen_ai.agent.id"
	AttrConversationID = "gen_ai.conversation.id"
	AttrGenAIToolName  = "gen_ai.tool.name"
	AttrGenAIToolArgs  = "gen_ai.tool.call.arguments"
	AttrErrorType      = "error.type"
	AttrOISpanKind     = "openinference.span.kind"
	AttrOIToolName     = "tool.name"
	AttrOIToolParams   = "tool.parameters"
)

// SpanEvents is what one span becomes: the plan and agent it names (plan
// may be empty, then Conversation may bind it), and its events, each a JSON
// object ready for evaluation.AppendEvent (agent_id is added when bound).
type SpanEvents struct {
	Plan, Agent, Conversation string
	// Key names the span (trace id and span id, hex) in rejections.
	Key    string
	Events []Event
	// Invalid says why the span cannot be taken (bad ids or times).
	Invalid string
}

// Event is one execution event of a span.
type Event struct {
	At     time.Time
	SpanID string
	// Span is the span's key (SpanEvents.Key).
	Span string
	// Last orders PLAN_COMPLETE after every other event of its plan in the
	// same export.
	Last bool
	Body map[string]any
}

// Map turns the spans of td into their events, in the order the request
// holds them; a span that maps to no event is left out.
func Map(td *tracev1.TracesData) []SpanEvents {
	var out []SpanEvents
	for _, rs := range td.GetResourceSpans() {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				if se := mapSpan(sp, res); len(se.Events) > 0 || se.Invalid != "" {
					out = append(out, se)
				}
			}
		}
	}
	return out
}

// maxUnixNano is the last instant a span time may name (int64 nanoseconds).
const maxUnixNano = 1<<63 - 1

// Spans counts the spans of td.
func Spans(td *tracev1.TracesData) int {
	n := 0
	for _, rs := range td.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += len(ss.GetSpans())
		}
	}
	return n
}

func mapSpan(sp *tracev1.Span, res map[string]*commonv1.AnyValue) SpanEvents {
	a := attrs(sp.GetAttributes())
	get := func(k string) string {
		if v := str(a[k]); v != "" {
			return v
		}
		return str(res[k])
	}
	se := SpanEvents{Plan: get(AttrPlanID), Conversation: get(AttrConversationID)}
	se.Agent = get(AttrGenAIAgentID)
	if se.Agent == "" {
		se.Agent = get(AttrAgentID)
	}
	traceID, spanID := hex.EncodeToString(sp.GetTraceId()), hex.EncodeToString(sp.GetSpanId())
	se.Key = traceID + "/" + spanID
	switch {
	case len(sp.GetTraceId()) != 16 || len(sp.GetSpanId()) != 8:
		se.Invalid = "a span's trace id must be 16 bytes and its span id 8"
		return se
	case sp.GetStartTimeUnixNano() > maxUnixNano || sp.GetEndTimeUnixNano() > maxUnixNano:
		se.Invalid = "a span's times must be in int64 Unix nanoseconds"
		return se
	case sp.GetEndTimeUnixNano() != 0 && sp.GetEndTimeUnixNano() < sp.GetStartTimeUnixNano():
		se.Invalid = "a span must not end before it starts"
		return se
	}
	start := time.Unix(0, int64(sp.GetStartTimeUnixNano())).UTC()
	end := time.Unix(0, int64(sp.GetEndTimeUnixNano())).UTC()
	if sp.GetEndTimeUnixNano() == 0 {
		end = start
	}
	base := func(role, typ string, at time.Time) map[string]any {
		m := map[string]any{
			"event_id":     "otel-" + traceID + "-" + spanID + "-" + role,
			"message_type": typ,
			"timestamp":    at.Format(time.RFC3339Nano),
			"trace_id":     traceID,
			"span_id":      spanID,
		}
		if p := sp.GetParentSpanId(); len(p) > 0 {
			m["parent_span_id"] = hex.EncodeToString(p)
		}
		return m
	}
	op := str(a[AttrGenAIOperation])
	if op == "execute_tool" || strings.EqualFold(str(a[AttrOISpanKind]), "TOOL") {
		tool := str(a[AttrGenAIToolName])
		rawArgs := str(a[AttrGenAIToolArgs])
		if tool == "" {
			tool = str(a[AttrOIToolName])
		}
		if rawArgs == "" {
			rawArgs = str(a[AttrOIToolParams])
		}
		if tool == "" {
			tool = sp.GetName()
		}
		req := base("req", "TOOL_REQUEST", start)
		req["tool"] = tool
		if obj := jsonObject(rawArgs); obj != nil {
			req["arguments"] = obj
		}
		res := base("res", "TOOL_RESULT", end)
		res["tool"] = tool
		res["status"] = "SUCCESS"
		if sp.GetStatus().GetCode() == tracev1.Status_STATUS_CODE_ERROR || str(a[AttrErrorType]) != "" {
			res["status"] = "ERROR"
		}
		se.Events = append(se.Events, Event{At: start, SpanID: spanID, Body: req}, Event{At: end, SpanID: spanID, Body: res})
	}
	if mt := strings.ToUpper(str(a[AttrMessageType])); mt != "" {
		ev := base("msg", mt, end)
		if v := jsonObject(str(a[AttrVariables])); v != nil {
			ev["variables"] = v
		}
		if o := jsonArray(str(a[AttrObservations])); o != nil {
			ev["observations"] = o
		}
		se.Events = append(se.Events, Event{At: end, SpanID: spanID, Last: mt == "PLAN_COMPLETE", Body: ev})
	}
	if (op == "invoke_agent" || op == "invoke_workflow") && boolean(a[AttrPlanRoot]) && strings.ToUpper(str(a[AttrMessageType])) != "PLAN_COMPLETE" {
		se.Events = append(se.Events, Event{At: end, SpanID: spanID, Last: true, Body: base("done", "PLAN_COMPLETE", end)})
	}
	for i := range se.Events {
		se.Events[i].Span = se.Key
	}
	return se
}

// Order sorts one plan's events of one export: by time, then span id,
// with PLAN_COMPLETE after every other.
func Order(evs []Event) {
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].Last != evs[j].Last {
			return !evs[i].Last
		}
		if !evs[i].At.Equal(evs[j].At) {
			return evs[i].At.Before(evs[j].At)
		}
		return evs[i].SpanID < evs[j].SpanID
	})
}

func attrs(kvs []*commonv1.KeyValue) map[string]*commonv1.AnyValue {
	m := make(map[string]*commonv1.AnyValue, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// str reads an attribute as text (numbers and booleans as written).
func str(v *commonv1.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonv1.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonv1.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return ""
}

func boolean(v *commonv1.AnyValue) bool {
	if b, ok := v.GetValue().(*commonv1.AnyValue_BoolValue); ok {
		return b.BoolValue
	}
	return strings.EqualFold(str(v), "true")
}

func jsonObject(s string) map[string]any {
	var m map[string]any
	if s == "" || json.Unmarshal([]byte(s), &m) != nil {
		return nil
	}
	return m
}

func jsonArray(s string) []any {
	var a []any
	if s == "" || json.Unmarshal([]byte(s), &a) != nil {
		return nil
	}
	return a
}
