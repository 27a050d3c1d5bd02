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
	"encoding/json"
	"errors"
	"fmt"

	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// Decoded is an export request decoded: its spans, and the spans refused
// on the wire for a limit (left in Traces with their ids alone).
type Decoded struct {
	Traces  *tracev1.TracesData
	Refused []RefusedSpan
}

// Decode reads an export request body, OTLP protobuf or OTLP JSON (whose
// trace and span ids are hex, not protobuf JSON's base64), checking l on
// the wire first (see Limits) and decoding straight into the protobuf
// types. Errors: a *LimitError for a request refused whole by a limit;
// another error says why the body is not a request.
func Decode(body []byte, isJSON bool, l Limits) (Decoded, error) {
	l = l.withDefaults()
	var td tracev1.TracesData
	if !isJSON {
		kept, refused, err := filterProto(body, l)
		if err != nil {
			return Decoded{}, protoError(err)
		}
		if err := proto.Unmarshal(kept, &td); err != nil {
			return Decoded{}, fmt.Errorf("not an OTLP protobuf ExportTraceServiceRequest: %w", err)
		}
		return Decoded{&td, refused}, nil
	}
	kept, refused, err := filterJSON(body, l)
	if err != nil {
		return Decoded{}, err
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(kept, &td); err != nil {
		return Decoded{}, fmt.Errorf("not an OTLP JSON ExportTraceServiceRequest: %w", err)
	}
	return Decoded{&td, refused}, nil
}

// protoError is filterProto's error as Decode returns it.
func protoError(err error) error {
	if errors.Is(err, errMalformed) {
		return fmt.Errorf("not an OTLP protobuf ExportTraceServiceRequest: %w", err)
	}
	return err
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
