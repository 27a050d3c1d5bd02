package otlpin

import (
	"errors"
	"fmt"

	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// errMalformed is a body that is not protobuf wire format.
var errMalformed = errors.New("malformed protobuf")

// Field numbers of the OTLP trace messages walked on the wire.
const (
	fTracesResourceSpans = 1
	fRSResource          = 1
	fRSScopeSpans        = 2
	fResourceAttributes  = 1
	fSSScope             = 1
	fSSSpans             = 2
	fScopeName           = 1
	fScopeVersion        = 2
	fScopeAttributes     = 3
	fSpanTraceID         = 1
	fSpanSpanID          = 2
	fSpanName            = 5
	fSpanAttributes      = 9
	fSpanEvents          = 11
	fSpanLinks           = 13
	fEventName           = 2
	fEventAttributes     = 3
	fLinkAttributes      = 4
	fKVKey               = 1
	fKVValue             = 2
	fAnyString           = 1
	fAnyArray            = 5
	fAnyKvlist           = 6
	fAnyBytes            = 7
	fListValues          = 1
)

// fields calls fn for every field of msg; for a length-delimited field v
// holds its bytes. It returns errMalformed for bytes that are not a
// message, or fn's error.
func fields(msg []byte, fn func(num protowire.Number, typ protowire.Type, v []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		var v []byte
		if typ == protowire.BytesType {
			b, m := protowire.ConsumeBytes(msg)
			if m < 0 {
				return errMalformed
			}
			v, n = b, m
		} else {
			n = protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				return errMalformed
			}
		}
		if err := fn(num, typ, v); err != nil {
			return err
		}
		msg = msg[n:]
	}
	return nil
}

// filterProto checks an OTLP protobuf request against l on the wire. It
// returns the body to decode (body itself, or a copy where each span past a
// limit is left with its ids alone) and the spans so refused. Errors: a
// *LimitError for the request as a whole, errMalformed.
func filterProto(body []byte, l Limits) ([]byte, []RefusedSpan, error) {
	// The limits, in a first pass that copies nothing; a second one
	// rebuilds the request only when a span was refused.
	refused, err := protoSpans(body, l, nil)
	if err != nil {
		return nil, nil, err
	}
	kept := body
	if len(refused) > 0 {
		var out []byte
		if _, err := protoSpans(body, l, &out); err != nil {
			return nil, nil, err
		}
		kept = out
	}
	// What is left decodes into, by the schema: every message and every
	// element of a repeated string or bytes field.
	bud := &budget{max: l.MaxElements}
	if err := bud.walk(kept, (&tracev1.TracesData{}).ProtoReflect().Descriptor(), 0, l.maxJSONDepth()); err != nil {
		return nil, nil, err
	}
	return kept, refused, nil
}

// protoSpans walks a request's resources, scopes and spans against l and
// returns the spans past a limit. With out, it also appends the request to
// it, each refused span left with its ids alone.
func protoSpans(body []byte, l Limits, out *[]byte) ([]RefusedSpan, error) {
	var refused []RefusedSpan
	spans := 0
	keep := func(dst *[]byte, num protowire.Number, typ protowire.Type, v []byte) {
		if out != nil {
			*dst = appendField(*dst, num, typ, v)
		}
	}
	err := fields(body, func(num protowire.Number, typ protowire.Type, rs []byte) error {
		if num != fTracesResourceSpans || typ != protowire.BytesType {
			return nil
		}
		var rsOut []byte
		// A singular field sent several times is merged by the decoder:
		// its occurrences are counted together.
		resource := &spanCheck{l: l}
		resourceAttrs := 0
		err := fields(rs, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch {
			case typ != protowire.BytesType:
			case num == fRSResource:
				if err := resource.attributesOf(v, fResourceAttributes, 0, &resourceAttrs); err != nil {
					return err
				}
				if resource.reason != "" {
					return &LimitError{Path: "resourceSpans.resource", Message: resource.reason}
				}
			case num == fRSScopeSpans:
				var ssOut []byte
				scope := &spanCheck{l: l}
				scopeAttrs := 0
				err := fields(v, func(num protowire.Number, typ protowire.Type, sv []byte) error {
					switch {
					case typ != protowire.BytesType:
					case num == fSSScope:
						if err := scope.scope(sv, &scopeAttrs); err != nil {
							return err
						}
						if scope.reason != "" {
							return &LimitError{Path: "resourceSpans.scopeSpans.scope", Message: scope.reason}
						}
					case num == fSSSpans:
						if spans++; spans > l.MaxSpans {
							return &LimitError{TooLarge: true, Path: "resourceSpans.scopeSpans.spans",
								Message: fmt.Sprintf("the request holds more than %d spans (the server's limit); export smaller batches", l.MaxSpans)}
						}
						c := &spanCheck{l: l}
						if err := c.span(sv); err != nil {
							return err
						}
						if c.reason != "" {
							refused = append(refused, RefusedSpan{Key: c.key(), Reason: c.reason})
							sv = idsOnly(c)
						}
					}
					keep(&ssOut, num, typ, sv)
					return nil
				})
				if err != nil {
					return err
				}
				v = ssOut
			}
			keep(&rsOut, num, typ, v)
			return nil
		})
		if err != nil {
			return err
		}
		if out != nil {
			*out = appendField(*out, num, typ, rsOut)
		}
		return nil
	})
	return refused, err
}

// walk spends the budget on what msg, a message of type md, decodes into:
// one element per message and per element of a repeated string or bytes
// field, whatever its size on the wire (an empty message is 2 bytes there
// and a struct of 50 to 100 bytes decoded), counting a singular message
// field sent several times (which the decoder merges, or replaces when it
// is a oneof) each time. Fields unknown to md are kept as bytes and cost
// nothing beyond them. Errors: a *LimitError past the budget or nested
// deeper than maxDepth; errMalformed.
func (b *budget) walk(msg []byte, md protoreflect.MessageDescriptor, depth, maxDepth int) error {
	if depth > maxDepth {
		return &LimitError{Path: "body", Message: fmt.Sprintf("the request is nested more than %d deep", maxDepth)}
	}
	fds := md.Fields()
	return fields(msg, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		fd := fds.ByNumber(num)
		switch {
		case fd == nil:
			return nil
		case fd.Kind() == protoreflect.MessageKind:
			if err := b.spend(); err != nil {
				return err
			}
			return b.walk(v, fd.Message(), depth+1, maxDepth)
		case fd.Cardinality() == protoreflect.Repeated && (fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind):
			return b.spend()
		}
		return nil
	})
}

// appendField appends a length-delimited field. The messages rebuilt
// (TracesData, ResourceSpans, ScopeSpans) have no other kind of field: one
// of another type is unknown to OTLP and left out.
func appendField(out []byte, num protowire.Number, typ protowire.Type, v []byte) []byte {
	if typ != protowire.BytesType {
		return out
	}
	out = protowire.AppendTag(out, num, protowire.BytesType)
	return protowire.AppendBytes(out, v)
}

// idsOnly is a refused span's bytes: its trace and span ids alone.
func idsOnly(c *spanCheck) []byte {
	var b []byte
	if c.traceID != nil {
		b = protowire.AppendTag(b, fSpanTraceID, protowire.BytesType)
		b = protowire.AppendBytes(b, c.traceID)
	}
	if c.spanID != nil {
		b = protowire.AppendTag(b, fSpanSpanID, protowire.BytesType)
		b = protowire.AppendBytes(b, c.spanID)
	}
	return b
}

// span checks a Span's bytes.
func (c *spanCheck) span(b []byte) error {
	attrs, events, links := 0, 0, 0
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fSpanTraceID:
			c.traceID = v
		case fSpanSpanID:
			c.spanID = v
		case fSpanName:
			c.value(len(v), "the span's name")
		case fSpanAttributes:
			if attrs++; c.count(attrs, c.l.MaxAttributes, "attributes on the span") {
				return c.keyValue(v, 0)
			}
		case fSpanEvents:
			if events++; c.count(events, c.l.MaxEvents, "events on the span") {
				n := 0
				return c.attributesOf(v, fEventAttributes, fEventName, &n)
			}
		case fSpanLinks:
			if links++; c.count(links, c.l.MaxLinks, "links on the span") {
				n := 0
				return c.attributesOf(v, fLinkAttributes, 0, &n)
			}
		}
		return nil
	})
}

// scope checks an InstrumentationScope; attrs counts its attributes
// across the occurrences of the scope field.
func (c *spanCheck) scope(b []byte, attrs *int) error {
	if err := c.attributesOf(b, fScopeAttributes, fScopeName, attrs); err != nil {
		return err
	}
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if num == fScopeVersion && typ == protowire.BytesType {
			c.value(len(v), "the scope's version")
		}
		return nil
	})
}

// attributesOf checks the attributes (field attrs, counted on from *n) and
// name (field name, if not 0) of a message.
func (c *spanCheck) attributesOf(b []byte, attrs, name protowire.Number, n *int) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case typ != protowire.BytesType:
		case num == attrs:
			if *n++; c.count(*n, c.l.MaxAttributes, "attributes") {
				return c.keyValue(v, 0)
			}
		case name != 0 && num == name:
			c.value(len(v), "a name")
		}
		return nil
	})
}

// keyValue checks a KeyValue at value nesting depth.
func (c *spanCheck) keyValue(b []byte, depth int) error {
	// The value's occurrences merge: their list elements count together.
	n := 0
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case typ != protowire.BytesType:
		case num == fKVKey:
			c.value(len(v), "an attribute key")
		case num == fKVValue:
			return c.anyValue(v, depth, &n)
		}
		return nil
	})
}

// anyValue checks an AnyValue at value nesting depth; n counts the
// elements of its array or key-value list across the occurrences that the
// decoder merges.
func (c *spanCheck) anyValue(b []byte, depth int, n *int) error {
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fAnyString, fAnyBytes:
			c.value(len(v), "an attribute value")
		case fAnyArray, fAnyKvlist:
			kind := num
			if !c.depth(depth + 1) {
				return nil
			}
			return fields(v, func(num protowire.Number, typ protowire.Type, e []byte) error {
				if num != fListValues || typ != protowire.BytesType || c.reason != "" {
					return nil
				}
				if *n++; !c.count(*n, c.l.MaxArrayLength, "values in one array or key-value list") {
					return nil
				}
				if kind == fAnyArray {
					inner := 0
					return c.anyValue(e, depth+1, &inner)
				}
				return c.keyValue(e, depth+1)
			})
		}
		return nil
	})
}
