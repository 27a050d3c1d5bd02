// Package otlpin is an OTLP/HTTP traces receiver that turns an instrumented
// agent's spans into the RFC-032 execution events of its plan: GenAI
// semantic-convention and OpenInference tool spans become TOOL_REQUEST and
// TOOL_RESULT, spans carrying aigp.message_type become that event, and the
// root span marked aigp.plan_root completes the plan. The events go through
// the same path as events posted one by one (evaluation.AppendEvent), so
// sealing, the digest chain, VERIFY and the evidence bundle are unchanged.
//
// Bodies decode into the official OTLP protobuf types
// (go.opentelemetry.io/proto/otlp/trace/v1.TracesData, which OTLP defines
// wire-identical to ExportTraceServiceRequest; the collector package would
// link gRPC into every binary that serves the route).
package otlpin

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"

	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Decode reads an export request body: OTLP protobuf, or OTLP JSON (whose
// trace and span ids are hex, not protobuf JSON's base64). An error says
// why the body is not a request.
func Decode(body []byte, isJSON bool) (*tracev1.TracesData, error) {
	var td tracev1.TracesData
	if !isJSON {
		if err := proto.Unmarshal(body, &td); err != nil {
			return nil, fmt.Errorf("not an OTLP protobuf ExportTraceServiceRequest: %w", err)
		}
		return &td, nil
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if err := hexIDsToBase64(doc); err != nil {
		return nil, err
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &td); err != nil {
		return nil, fmt.Errorf("not an OTLP JSON ExportTraceServiceRequest: %w", err)
	}
	return &td, nil
}

// idFields are the OTLP JSON fields that hold ids in hex.
var idFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true, "trace_id": true, "span_id": true, "parent_span_id": true}

// hexIDsToBase64 rewrites, in place, every id field of an OTLP JSON
// document from hex to the base64 protobuf JSON expects.
func hexIDsToBase64(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if s, ok := val.(string); ok && idFields[k] {
				if s == "" {
					continue
				}
				b, err := hex.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s %q is not hex", k, s)
				}
				x[k] = base64.StdEncoding.EncodeToString(b)
				continue
			}
			if err := hexIDsToBase64(val); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range x {
			if err := hexIDsToBase64(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// Response encodes an ExportTraceServiceResponse: empty when nothing was
// rejected, else partial_success with the rejected span count and the
// message, in protobuf or in OTLP JSON. (Its message type lives in the
// collector package with the gRPC service; three fields are written here
// with protowire instead.)
func Response(rejected int64, message string, isJSON bool) []byte {
	if isJSON {
		if rejected == 0 && message == "" {
			return []byte("{}")
		}
		b, _ := json.Marshal(map[string]any{"partialSuccess": map[string]any{
			"rejectedSpans": fmt.Sprint(rejected), "errorMessage": message}})
		return b
	}
	if rejected == 0 && message == "" {
		return []byte{}
	}
	var ps []byte
	if rejected != 0 {
		ps = protowire.AppendTag(ps, 1, protowire.VarintType)
		ps = protowire.AppendVarint(ps, uint64(rejected))
	}
	if message != "" {
		ps = protowire.AppendTag(ps, 2, protowire.BytesType)
		ps = protowire.AppendString(ps, message)
	}
	var out []byte
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	return protowire.AppendBytes(out, ps)
}
