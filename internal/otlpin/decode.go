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
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
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

// MaxSpans bounds the spans of one export request: counted before the
// body is decoded, so that a small compressed body of millions of empty
// spans costs no memory (413 past it; exporters batch 512 by default).
const MaxSpans = 5000

// ErrTooManySpans is returned by CountSpans past MaxSpans.
var ErrTooManySpans = fmt.Errorf("an export request holds more than %d spans; export smaller batches", MaxSpans)

// CountSpans counts the spans of a request body without decoding it:
// protobuf by its wire format (ResourceSpans 1, ScopeSpans 2, Span 2),
// OTLP JSON by its tokens (the objects of every "spans" array). It stops
// at MaxSpans+1 with ErrTooManySpans, and lets the decoder report a body
// it cannot read.
func CountSpans(body []byte, isJSON bool) error {
	n := 0
	if isJSON {
		return countJSON(body)
	}
	err := eachField(body, 1, func(rs []byte) error {
		return eachField(rs, 2, func(ss []byte) error {
			return eachField(ss, 2, func([]byte) error {
				if n++; n > MaxSpans {
					return ErrTooManySpans
				}
				return nil
			})
		})
	})
	if errors.Is(err, ErrTooManySpans) {
		return err
	}
	return nil
}

// eachField calls fn with the bytes of every length-delimited field num of
// msg; other fields are skipped; a malformed message ends the walk.
func eachField(msg []byte, num protowire.Number, fn func([]byte) error) error {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return nil
		}
		msg = msg[l:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return nil
			}
			if n == num {
				if err := fn(v); err != nil {
					return err
				}
			}
			msg = msg[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(n, typ, msg)
		if m < 0 {
			return nil
		}
		msg = msg[m:]
	}
	return nil
}

// countJSON counts the objects of "spans" arrays, token by token.
func countJSON(body []byte) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	type frame struct {
		array, spans, expectKey bool
		key                     string
	}
	var stack []frame
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the decoder reports what is wrong
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				if top != nil && top.array && top.spans {
					if n++; n > MaxSpans {
						return ErrTooManySpans
					}
				}
				if top != nil && !top.array {
					top.expectKey = true
				}
				stack = append(stack, frame{expectKey: true})
			case '[':
				spans := top != nil && !top.array && top.key == "spans"
				if top != nil && !top.array {
					top.expectKey = true
				}
				stack = append(stack, frame{array: true, spans: spans})
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
		default:
			if top == nil || top.array {
				continue
			}
			if top.expectKey {
				top.key, _ = t.(string)
				top.expectKey = false
			} else {
				top.expectKey = true
			}
		}
	}
}
