package otlpin

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
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
	var refused []RefusedSpan
	spans := 0
	bud := &budget{max: l.MaxElements}
	var out []byte
	err := fields(body, func(num protowire.Number, typ protowire.Type, rs []byte) error {
		if num != fTracesResourceSpans || typ != protowire.BytesType {
			return nil
		}
		var rsOut []byte
		err := fields(rs, func(num protowire.Number, typ protowire.Type, v []byte) error {
			switch {
			case typ != protowire.BytesType:
			case num == fRSResource:
				c := &spanCheck{l: l, budget: bud}
				if err := c.attributes(v, fResourceAttributes); err != nil {
					return err
				}
				if c.reason != "" {
					return &LimitError{Path: "resourceSpans.resource", Message: c.reason}
				}
			case num == fRSScopeSpans:
				var ssOut []byte
				err := fields(v, func(num protowire.Number, typ protowire.Type, sv []byte) error {
					switch {
					case typ != protowire.BytesType:
					case num == fSSScope:
						c := &spanCheck{l: l, budget: bud}
						if err := c.scope(sv); err != nil {
							return err
						}
						if c.reason != "" {
							return &LimitError{Path: "resourceSpans.scopeSpans.scope", Message: c.reason}
						}
					case num == fSSSpans:
						if spans++; spans > l.MaxSpans {
							return &LimitError{TooLarge: true, Path: "resourceSpans.scopeSpans.spans",
								Message: fmt.Sprintf("the request holds more than %d spans (the server's limit); export smaller batches", l.MaxSpans)}
						}
						if err := bud.spend(); err != nil {
							return err
						}
						c := &spanCheck{l: l, budget: bud}
						if err := c.span(sv); err != nil {
							return err
						}
						if c.reason != "" {
							refused = append(refused, RefusedSpan{Key: c.key(), Reason: c.reason})
							sv = idsOnly(c)
						}
					}
					ssOut = appendField(ssOut, num, typ, sv)
					return nil
				})
				if err != nil {
					return err
				}
				v = ssOut
			}
			rsOut = appendField(rsOut, num, typ, v)
			return nil
		})
		if err != nil {
			return err
		}
		out = appendField(out, num, typ, rsOut)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(refused) == 0 {
		return body, nil, nil
	}
	return out, refused, nil
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
				if err := c.budget.spend(); err != nil {
					return err
				}
				return c.attributesOf(v, fEventAttributes, fEventName)
			}
		case fSpanLinks:
			if links++; c.count(links, c.l.MaxLinks, "links on the span") {
				if err := c.budget.spend(); err != nil {
					return err
				}
				return c.attributesOf(v, fLinkAttributes, 0)
			}
		}
		return nil
	})
}

// scope checks an InstrumentationScope.
func (c *spanCheck) scope(b []byte) error {
	return c.attributesOf(b, fScopeAttributes, fScopeName)
}

// attributes checks the attributes (field num) of a message.
func (c *spanCheck) attributes(b []byte, num protowire.Number) error {
	return c.attributesOf(b, num, 0)
}

// attributesOf checks the attributes (field attrs) and name (field name,
// if not 0) of a message.
func (c *spanCheck) attributesOf(b []byte, attrs, name protowire.Number) error {
	n := 0
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case typ != protowire.BytesType:
		case num == attrs:
			if n++; c.count(n, c.l.MaxAttributes, "attributes") {
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
	if err := c.budget.spend(); err != nil {
		return err
	}
	return fields(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		switch {
		case typ != protowire.BytesType:
		case num == fKVKey:
			c.value(len(v), "an attribute key")
		case num == fKVValue:
			return c.anyValue(v, depth)
		}
		return nil
	})
}

// anyValue checks an AnyValue at value nesting depth.
func (c *spanCheck) anyValue(b []byte, depth int) error {
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
			n := 0
			return fields(v, func(num protowire.Number, typ protowire.Type, e []byte) error {
				if num != fListValues || typ != protowire.BytesType {
					return nil
				}
				if n++; !c.count(n, c.l.MaxArrayLength, "values in one array or key-value list") {
					return nil
				}
				if c.reason != "" {
					return nil
				}
				if kind == fAnyArray {
					if err := c.budget.spend(); err != nil {
						return err
					}
					return c.anyValue(e, depth+1)
				}
				return c.keyValue(e, depth+1)
			})
		}
		return nil
	})
}
