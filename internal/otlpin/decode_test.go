package otlpin

import (
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

const traceHex = "5b8efff798038103d269b633813fc60c"

func spanHex(i int) string { return fmt.Sprintf("%016x", i+1) }

// bodies is one request in both encodings: spans[i] gets attrs(i) as
// extra attributes and events(i) events; every span has one ordinary
// attribute.
type shape struct {
	attrs, events, links int
	value                int // bytes of one attribute value
	depth                int // nested arrays of the last attribute
	array                int // values of one array attribute
}

func protoBody(t testing.TB, shapes []shape, resourceAttrs int) []byte {
	t.Helper()
	var spans []*tracev1.Span
	for i, sh := range shapes {
		sp := &tracev1.Span{TraceId: id(traceHex), SpanId: id(spanHex(i)), Name: "execute_tool t",
			Attributes: []*commonv1.KeyValue{kv("gen_ai.operation.name", "execute_tool")}}
		for range sh.attrs {
			sp.Attributes = append(sp.Attributes, &commonv1.KeyValue{})
		}
		for range sh.events {
			sp.Events = append(sp.Events, &tracev1.Span_Event{Name: "e"})
		}
		for range sh.links {
			sp.Links = append(sp.Links, &tracev1.Span_Link{TraceId: id(traceHex), SpanId: id(spanHex(99))})
		}
		if sh.value > 0 {
			sp.Attributes = append(sp.Attributes, kv("big", strings.Repeat("x", sh.value)))
		}
		if sh.array > 0 {
			arr := &commonv1.ArrayValue{}
			for range sh.array {
				arr.Values = append(arr.Values, &commonv1.AnyValue{Value: &commonv1.AnyValue_IntValue{IntValue: 1}})
			}
			sp.Attributes = append(sp.Attributes, &commonv1.KeyValue{Key: "arr", Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: arr}}})
		}
		if sh.depth > 0 {
			v := &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: "leaf"}}
			for range sh.depth {
				v = &commonv1.AnyValue{Value: &commonv1.AnyValue_ArrayValue{ArrayValue: &commonv1.ArrayValue{Values: []*commonv1.AnyValue{v}}}}
			}
			sp.Attributes = append(sp.Attributes, &commonv1.KeyValue{Key: "deep", Value: v})
		}
		spans = append(spans, sp)
	}
	res := &resourcev1.Resource{}
	for range resourceAttrs {
		res.Attributes = append(res.Attributes, kv("r", "v"))
	}
	b, err := proto.Marshal(&tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{Resource: res, ScopeSpans: []*tracev1.ScopeSpans{{Spans: spans}}}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonBody(shapes []shape, resourceAttrs int) []byte {
	var spans []string
	for i, sh := range shapes {
		attrs := []string{`{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}}`}
		for range sh.attrs {
			attrs = append(attrs, `{}`)
		}
		if sh.value > 0 {
			attrs = append(attrs, `{"key":"big","value":{"stringValue":"`+strings.Repeat("x", sh.value)+`"}}`)
		}
		if sh.array > 0 {
			attrs = append(attrs, `{"key":"arr","value":{"arrayValue":{"values":[`+strings.TrimSuffix(strings.Repeat(`{"intValue":"1"},`, sh.array), ",")+`]}}}`)
		}
		if sh.depth > 0 {
			v := `{"stringValue":"leaf"}`
			for range sh.depth {
				v = `{"arrayValue":{"values":[` + v + `]}}`
			}
			attrs = append(attrs, `{"key":"deep","value":`+v+`}`)
		}
		var events, links []string
		for range sh.events {
			events = append(events, `{"name":"e"}`)
		}
		for range sh.links {
			links = append(links, `{"traceId":"`+traceHex+`","spanId":"`+spanHex(99)+`"}`)
		}
		spans = append(spans, fmt.Sprintf(`{"traceId":%q,"spanId":%q,"name":"execute_tool t","attributes":[%s],"events":[%s],"links":[%s]}`,
			traceHex, spanHex(i), strings.Join(attrs, ","), strings.Join(events, ","), strings.Join(links, ",")))
	}
	var res []string
	for range resourceAttrs {
		res = append(res, `{"key":"r","value":{"stringValue":"v"}}`)
	}
	return []byte(`{"resourceSpans":[{"resource":{"attributes":[` + strings.Join(res, ",") + `]},"scopeSpans":[{"scope":{"name":"s"},"spans":[` + strings.Join(spans, ",") + `]}]}]}`)
}

var testLimits = Limits{MaxSpans: 10, MaxAttributes: 5, MaxEvents: 3, MaxLinks: 2, MaxValueBytes: 100, MaxArrayLength: 4, MaxDepth: 2}

// TestLimitsOnTheWire: each per-span limit refuses that span alone (named
// by its ids and the limit), in protobuf and in OTLP JSON, and leaves the
// others decoded whole; the request's span count and its resource's
// attributes refuse it whole.
func TestLimitsOnTheWire(t *testing.T) {
	cases := []struct {
		name   string
		broken shape
		reason string
	}{
		{"attributes", shape{attrs: 5}, "more than 5 attributes on the span"},
		{"events", shape{events: 4}, "more than 3 events on the span"},
		{"links", shape{links: 3}, "more than 2 links on the span"},
		{"value", shape{value: 101}, "an attribute value is over 100 bytes"},
		{"array", shape{array: 5}, "more than 4 values in one array"},
		{"depth", shape{depth: 3}, "values nested more than 2 deep"},
	}
	fine := shape{attrs: 1, events: 3, links: 2, value: 100, array: 4, depth: 2} // 5 attributes
	for _, tc := range cases {
		for _, isJSON := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/json=%v", tc.name, isJSON), func(t *testing.T) {
				shapes := []shape{fine, tc.broken, fine}
				body := protoBody(t, shapes, 1)
				if isJSON {
					body = jsonBody(shapes, 1)
				}
				d, err := Decode(body, isJSON, testLimits)
				if err != nil {
					t.Fatal(err)
				}
				if len(d.Refused) != 1 || d.Refused[0].Key != traceHex+"/"+spanHex(1) || !strings.Contains(d.Refused[0].Reason, tc.reason) {
					t.Fatalf("refused %+v, want span 1 for %q", d.Refused, tc.reason)
				}
				got := d.Traces.ResourceSpans[0].ScopeSpans[0].Spans
				if len(got) != 3 || len(got[1].Attributes) != 0 || hex.EncodeToString(got[1].SpanId) != spanHex(1) {
					t.Fatalf("the refused span is not left with its ids alone: %v", got[1])
				}
				for _, i := range []int{0, 2} {
					if len(got[i].Attributes) != 5 || len(got[i].Events) != 3 || len(got[i].Links) != 2 || hex.EncodeToString(got[i].TraceId) != traceHex {
						t.Fatalf("span %d not decoded whole: %d attributes, %d events, %d links", i, len(got[i].Attributes), len(got[i].Events), len(got[i].Links))
					}
				}
			})
		}
	}
	for _, isJSON := range []bool{false, true} {
		many := make([]shape, 11)
		body := protoBody(t, many, 0)
		if isJSON {
			body = jsonBody(many, 0)
		}
		var le *LimitError
		if _, err := Decode(body, isJSON, testLimits); !errors.As(err, &le) || !le.TooLarge {
			t.Fatalf("json=%v: 11 spans: %v, want a LimitError (413)", isJSON, err)
		}
		body = protoBody(t, many[:2], 6)
		if isJSON {
			body = jsonBody(many[:2], 6)
		}
		if _, err := Decode(body, isJSON, testLimits); !errors.As(err, &le) || le.TooLarge || !strings.Contains(le.Path, "resource") {
			t.Fatalf("json=%v: 6 resource attributes: %v, want a LimitError naming the resource", isJSON, err)
		}
	}
}

// TestJSONNamesAsProtojsonReadsThem: the scan knows a member by every name
// protojson decodes it from (proto names, escapes), so none slips past a
// limit; ids are rewritten from hex wherever they are.
func TestJSONNamesAsProtojsonReadsThem(t *testing.T) {
	body := `{"resource_spans":[{"scope_spans":[{"sp\u0061ns":[{"trace_id":"` + traceHex + `","span_id":"` + spanHex(0) + `","parent_span_id":"` + spanHex(7) +
		`","attributes":[{},{},{},{},{},{}]},{"traceId":"` + traceHex + `","spanId":"` + spanHex(1) + `"}]}]}]}`
	d, err := Decode([]byte(body), true, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Refused) != 1 || d.Refused[0].Key != traceHex+"/"+spanHex(0) {
		t.Fatalf("refused %+v", d.Refused)
	}
	sp := d.Traces.ResourceSpans[0].ScopeSpans[0].Spans[1]
	if hex.EncodeToString(sp.SpanId) != spanHex(1) {
		t.Fatalf("span id %x", sp.SpanId)
	}
	if _, err := Decode([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"zz"}]}]}]}`), true, testLimits); err == nil || !strings.Contains(err.Error(), "not hex") {
		t.Fatalf("a bad id: %v", err)
	}
	deep := `{"resourceSpans":` + strings.Repeat(`[`, 100) + strings.Repeat(`]`, 100) + `}`
	var le *LimitError
	if _, err := Decode([]byte(deep), true, testLimits); !errors.As(err, &le) {
		t.Fatalf("100 nested arrays: %v", err)
	}
}

// hostile is a request whose one span has n empty attributes: 9 KB
// gzip-compressed for 3,000,000 of them.
func hostile(t testing.TB, n int, isJSON bool) []byte {
	if isJSON {
		return jsonBody([]shape{{attrs: n}}, 0)
	}
	return protoBody(t, []shape{{attrs: n}}, 0)
}

// allocated is the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestHostileBodyCostsItsSize: a span of 3,000,000 empty attributes is
// refused on the wire, and decoding the request allocates less than twice
// its own size (it cost about 330 MB when the body was decoded first).
func TestHostileBodyCostsItsSize(t *testing.T) {
	for _, isJSON := range []bool{false, true} {
		body := hostile(t, 3_000_000, isJSON)
		var d Decoded
		var err error
		n := allocated(func() { d, err = Decode(body, isJSON, Limits{}) })
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Refused) != 1 {
			t.Fatalf("json=%v: refused %+v", isJSON, d.Refused)
		}
		t.Logf("json=%v: a %d-byte body, %d bytes allocated to decode it", isJSON, len(body), n)
		if n > 2*uint64(len(body)) {
			t.Fatalf("json=%v: %d bytes allocated for a %d-byte body", isJSON, n, len(body))
		}
	}
}

// TestElementBudget: what a request decodes into is bounded as a whole,
// each span within its own limits; a span refused for a limit counts only
// its ids.
func TestElementBudget(t *testing.T) {
	shapes := []shape{{attrs: 4, events: 1}, {attrs: 4, events: 1}, {attrs: 4, events: 1}}
	for _, isJSON := range []bool{false, true} {
		body := protoBody(t, shapes, 0)
		if isJSON {
			body = jsonBody(shapes, 0)
		}
		l := testLimits
		l.MaxElements = 12
		var le *LimitError
		if _, err := Decode(body, isJSON, l); !errors.As(err, &le) || !le.TooLarge {
			t.Fatalf("json=%v: %v, want a LimitError (413)", isJSON, err)
		}
		l.MaxElements = 100
		if _, err := Decode(body, isJSON, l); err != nil {
			t.Fatalf("json=%v: within the budget: %v", isJSON, err)
		}
		// 3 spans of 6 attributes: refused, each left with its ids.
		wide := []shape{{attrs: 5}, {attrs: 5}, {attrs: 5}}
		body = protoBody(t, wide, 0)
		if isJSON {
			body = jsonBody(wide, 0)
		}
		l.MaxElements = 16 // (18 attributes and 3 spans would be 40 and more)
		if d, err := Decode(body, isJSON, l); err != nil || len(d.Refused) != 3 {
			t.Fatalf("json=%v: refused spans count their ids only: %v, %d refused", isJSON, err, len(d.Refused))
		}
	}
}

// decodedBound is what Decode may allocate for a body: the copy of the
// body it may make, and about 200 bytes per element (MaxElements bounds
// those).
func decodedBound(body []byte, l Limits) uint64 {
	return 2*uint64(len(body)) + 200*uint64(l.MaxElements) + 512<<10 // (and protojson's first use)
}

func fuzzDecode(f *testing.F, isJSON bool) {
	shapes := []shape{{attrs: 2, events: 1, links: 1, value: 10, array: 2, depth: 1}, {attrs: 40}}
	if isJSON {
		f.Add(jsonBody(shapes, 1))
		f.Add([]byte(`{"resource_spans":[{"scope_spans":[{"sp\u0061ns":[{"trace_id":"` + traceHex + `"}]}]}]}`))
	} else {
		f.Add(protoBody(f, shapes, 1))
	}
	l := Limits{MaxSpans: 50, MaxAttributes: 8, MaxEvents: 4, MaxLinks: 4, MaxValueBytes: 64, MaxArrayLength: 8, MaxDepth: 3, MaxElements: 400}
	f.Fuzz(func(t *testing.T, body []byte) {
		var d Decoded
		var err error
		n := allocated(func() { d, err = Decode(body, isJSON, l) })
		if n > decodedBound(body, l) {
			t.Fatalf("%d bytes allocated for a %d-byte body", n, len(body))
		}
		if err != nil {
			return
		}
		refused := map[string]bool{}
		for _, r := range d.Refused {
			refused[r.Key] = true
		}
		for _, rs := range d.Traces.ResourceSpans {
			if !valuesWithin(rs.GetResource().GetAttributes(), l, 0) {
				t.Fatalf("a resource past the limits was decoded: %v", rs.GetResource())
			}
			for _, ss := range rs.ScopeSpans {
				if !valuesWithin(ss.GetScope().GetAttributes(), l, 0) {
					t.Fatalf("a scope past the limits was decoded: %v", ss.GetScope())
				}
				for _, sp := range ss.Spans {
					if len(sp.Attributes) > l.MaxAttributes || len(sp.Events) > l.MaxEvents || len(sp.Links) > l.MaxLinks || len(sp.Name) > l.MaxValueBytes ||
						!valuesWithin(sp.Attributes, l, 0) {
						t.Fatalf("a span past the limits was decoded: %v", sp)
					}
				}
			}
		}
	})
}

// valuesWithin reports whether attributes keep the per-span limits: their
// count, keys and values, arrays' lengths and nesting.
func valuesWithin(kvs []*commonv1.KeyValue, l Limits, depth int) bool {
	if len(kvs) > l.MaxAttributes && depth == 0 || len(kvs) > l.MaxArrayLength && depth > 0 {
		return false
	}
	for _, kv := range kvs {
		if len(kv.Key) > l.MaxValueBytes || !valueWithin(kv.Value, l, depth) {
			return false
		}
	}
	return true
}

func valueWithin(v *commonv1.AnyValue, l Limits, depth int) bool {
	switch {
	case len(v.GetStringValue()) > l.MaxValueBytes || len(v.GetBytesValue()) > l.MaxValueBytes:
		return false
	case v.GetArrayValue() != nil:
		if depth+1 > l.MaxDepth || len(v.GetArrayValue().Values) > l.MaxArrayLength {
			return false
		}
		for _, e := range v.GetArrayValue().Values {
			if !valueWithin(e, l, depth+1) {
				return false
			}
		}
	case v.GetKvlistValue() != nil:
		return depth+1 <= l.MaxDepth && valuesWithin(v.GetKvlistValue().Values, l, depth+1)
	}
	return true
}

// FuzzDecodeProto and FuzzDecodeJSON: whatever the body, Decode does not
// panic, allocates within a bound of its size and the element budget, and
// decodes no span past a limit.
func FuzzDecodeProto(f *testing.F) { fuzzDecode(f, false) }
func FuzzDecodeJSON(f *testing.F)  { fuzzDecode(f, true) }
