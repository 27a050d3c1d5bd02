package otlpin

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// These tests are a hostile client's review of the decoders: each failed
// before its fix (a limit bypassed, memory amplified, a stub with the
// wrong id), or held and must keep holding.

func fld(num protowire.Number, v []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}
func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
func rep(b []byte, n int) []byte { return bytes.Repeat(b, n) }

// request wraps encoded spans in one ResourceSpans and ScopeSpans.
func request(resource []byte, scope []byte, spans ...[]byte) []byte {
	var ss []byte
	if scope != nil {
		ss = append(ss, fld(fSSScope, scope)...)
	}
	for _, sp := range spans {
		ss = append(ss, fld(fSSSpans, sp)...)
	}
	var rs []byte
	if resource != nil {
		rs = append(rs, fld(fRSResource, resource)...)
	}
	rs = append(rs, fld(fRSScopeSpans, ss)...)
	return fld(fTracesResourceSpans, rs)
}

func spanIDs(i int) []byte {
	return cat(fld(fSpanTraceID, id(traceHex)), fld(fSpanSpanID, id(spanHex(i))))
}

var intValue = []byte{0x18, 0x01} // AnyValue{int_value: 1}

func arrayOf(n int) []byte { return fld(fAnyArray, rep(fld(fListValues, intValue), n)) }

func kvRaw(key string, anyValue []byte) []byte {
	return cat(fld(fKVKey, []byte(key)), fld(fKVValue, anyValue))
}

// TestSingularFieldsSentSeveralTimes: the decoder merges a singular
// message field sent several times; its occurrences are counted together
// (an array split across occurrences of array_value or of the value, a
// resource or scope sent four times with 5 attributes each).
func TestSingularFieldsSentSeveralTimes(t *testing.T) {
	l := testLimits // MaxArrayLength 4, MaxAttributes 5
	kvTwice := fld(fKVKey, []byte("arr"))
	for range 5 {
		kvTwice = append(kvTwice, fld(fKVValue, arrayOf(4))...)
	}
	kvl := fld(fAnyKvlist, rep(fld(fListValues, kvRaw("k", intValue)), 4))
	for name, sp := range map[string][]byte{
		"array_value split": cat(spanIDs(0), fld(fSpanAttributes, kvRaw("arr", rep(arrayOf(4), 5)))),
		"value split":       cat(spanIDs(0), fld(fSpanAttributes, kvTwice)),
		"kvlist split":      cat(spanIDs(0), fld(fSpanAttributes, kvRaw("m", rep(kvl, 5)))),
	} {
		d, err := Decode(request(nil, nil, sp), false, l)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(d.Refused) != 1 {
			t.Errorf("%s: a span whose merged value holds 20 values was decoded", name)
		}
	}
	res5 := rep(fld(fResourceAttributes, kvRaw("r", nil)), 5)
	sc5 := rep(fld(fScopeAttributes, kvRaw("s", nil)), 5)
	var le *LimitError
	if _, err := Decode(fld(fTracesResourceSpans, cat(rep(fld(fRSResource, res5), 4), fld(fRSScopeSpans, fld(fSSSpans, spanIDs(0))))), false, l); !errors.As(err, &le) {
		t.Errorf("a resource sent 4 times with 5 attributes each: %v, want refused", err)
	}
	if _, err := Decode(fld(fTracesResourceSpans, fld(fRSScopeSpans, cat(rep(fld(fSSScope, sc5), 4), fld(fSSSpans, spanIDs(0))))), false, l); !errors.As(err, &le) {
		t.Errorf("a scope sent 4 times with 5 attributes each: %v, want refused", err)
	}
}

// hostileSize is the body size of the amplification tests: the server's
// default decompressed bound, smaller in -short.
func hostileSize() int {
	if testing.Short() {
		return 2 << 20
	}
	return 16 << 20
}

// TestNoAmplification: bodies of nothing but empty messages or objects,
// wherever they sit (resourceSpans, scopeSpans, a resource's entity refs,
// an AnyValue flipping its oneof, member names protojson ignores, escaped
// names), allocate within the bound of the body and the element budget,
// or are refused.
func TestNoAmplification(t *testing.T) {
	big := hostileSize()
	flip := request(nil, nil, cat(spanIDs(0), fld(fSpanAttributes, kvRaw("x", rep([]byte{0x2a, 0x00, 0x32, 0x00}, big/4-16)))))
	cases := []struct {
		name   string
		body   []byte
		isJSON bool
	}{
		{"proto empty resourceSpans", rep([]byte{0x0a, 0x00}, big/2), false},
		{"proto empty scopeSpans", fld(fTracesResourceSpans, rep([]byte{0x12, 0x00}, big/2-4)), false},
		{"proto empty entityRefs", fld(fTracesResourceSpans, fld(fRSResource, rep([]byte{0x1a, 0x00}, big/2-8))), false},
		{"proto empty idKeys", fld(fTracesResourceSpans, fld(fRSResource, fld(3, rep([]byte{0x1a, 0x00}, big/2-16)))), false},
		{"proto oneof flip", flip, false},
		{"proto 1 span, a large unknown field", request(nil, nil, cat(spanIDs(0), fld(100, rep([]byte("p"), big-100)))), false},
		{"json empty resourceSpans", []byte(`{"resourceSpans":[` + strings.TrimSuffix(strings.Repeat(`{},`, big/3-10), ",") + `]}`), true},
		{"json empty entityRefs", []byte(`{"resourceSpans":[{"resource":{"entityRefs":[` + strings.TrimSuffix(strings.Repeat(`{},`, big/3-20), ",") + `]}}]}`), true},
		{"json ignored TRACEID members", []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{` + strings.TrimSuffix(strings.Repeat(`"TRACEID":"00",`, big/16), ",") + `}]}]}]}`), true},
		{"json escaped names", []byte(`{"x":{` + strings.TrimSuffix(strings.Repeat(`"\u0061":0,`, big/12), ",") + `}}`), true},
	}
	for _, c := range cases {
		var err error
		n := allocated(func() { _, err = Decode(c.body, c.isJSON, Limits{}) })
		bound := decodedBound(c.body, DefaultLimits())
		t.Logf("%s: %d bytes, %d allocated (bound %d), %v", c.name, len(c.body), n, bound, err)
		if n > bound {
			t.Errorf("%s: %d bytes allocated for a %d-byte body (bound %d)", c.name, n, len(c.body), bound)
		}
	}
}

// TestJSONIDsAsProtojsonReadsThem: only the member names protojson takes
// are ids: a refused span's stub keeps the trace id protojson would have
// read, and a member it ignores is not checked as hex.
func TestJSONIDsAsProtojsonReadsThem(t *testing.T) {
	other := "ffffffffffffffffffffffffffffffff"
	body := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"` + traceHex + `","TRACEID":"` + other + `","spanId":"` + spanHex(0) +
		`","attributes":[{},{},{},{},{},{}]}]}]}]}`
	d, err := Decode([]byte(body), true, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(d.Traces.ResourceSpans[0].ScopeSpans[0].Spans[0].TraceId); got != traceHex || d.Refused[0].Key != traceHex+"/"+spanHex(0) {
		t.Fatalf("the refused span's stub: trace id %s, key %s; want %s", got, d.Refused[0].Key, traceHex)
	}
	if _, err := Decode([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"`+traceHex+`","TraceID":"not hex"}]}]}]}`), true, testLimits); err != nil {
		t.Fatalf("a member protojson ignores was checked: %v", err)
	}
}

// TestScopeVersionBounded: a scope's version is held to MaxValueBytes, in
// both encodings.
func TestScopeVersionBounded(t *testing.T) {
	long := strings.Repeat("v", 1000)
	var le *LimitError
	js := `{"resourceSpans":[{"scopeSpans":[{"scope":{"name":"s","version":"` + long + `"},"spans":[]}]}]}`
	if _, err := Decode([]byte(js), true, testLimits); !errors.As(err, &le) {
		t.Errorf("json: %v", err)
	}
	pb := fld(fTracesResourceSpans, fld(fRSScopeSpans, fld(fSSScope, fld(fScopeVersion, []byte(long)))))
	if _, err := Decode(pb, false, testLimits); !errors.As(err, &le) {
		t.Errorf("protobuf: %v", err)
	}
}

// TestJSONTextChecked: bytes that are not UTF-8 or a lone surrogate escape
// are a TextError naming where (the scan checks every string; the path is
// found only then); a pair is fine.
func TestJSONTextChecked(t *testing.T) {
	for _, c := range []struct {
		body string
		bad  bool
	}{
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a \ud83d\ude00 b"}]}]}]}`, false},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a \ud83d b"}]}]}]}`, true},
		{`{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"a \ude00 b"}]}]}]}`, true},
		{"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":\"a \xff b\"}]}]}]}", true},
		{"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"name\":\"é\"}]}]}]}", false},
	} {
		_, err := Decode([]byte(c.body), true, testLimits)
		var te *TextError
		if got := errors.As(err, &te); got != c.bad {
			t.Errorf("%q: %v", c.body, err)
		} else if got && !strings.Contains(te.Path, "spans[0].name") {
			t.Errorf("%q: path %q", c.body, te.Path)
		}
	}
}

// TestHostileBodiesHold: attacks that held (duplicates protojson refuses,
// escapes, nesting, malformed bodies) keep holding: each is refused or
// its span refused, and nothing panics.
func TestHostileBodiesHold(t *testing.T) {
	six := `[{},{},{},{},{},{}]`
	arr5 := `{"values":[{},{},{},{},{}]}`
	for name, sp := range map[string]string{
		"escaped attributes key":   `{"traceId":"01","attribute\u0073":` + six + `}`,
		"attributes twice":         `{"traceId":"01","attributes":[{},{},{}],"attributes":[{},{},{}]}`,
		"arrayValue + array_value": `{"traceId":"01","attributes":[{"value":{"arrayValue":{"values":[{},{},{}]},"array_value":{"values":[{},{}]}}}]}`,
		"array too long":           `{"traceId":"01","attributes":[{"value":{"arrayValue":` + arr5 + `}}]}`,
		"escaped arrayValue":       `{"traceId":"01","attributes":[{"value":{"arr\u0061yValue":` + arr5 + `}}]}`,
		"kvlist_value":             `{"traceId":"01","attributes":[{"value":{"kvlist_value":{"values":[{},{},{},{},{}]}}}]}`,
		"null then real":           `{"traceId":"01","attributes":null,"attributes":` + six + `}`,
		"link attributes":          `{"traceId":"01","links":[{"attributes":` + six + `}]}`,
		"event attributes":         `{"traceId":"01","events":[{"attributes":` + six + `}]}`,
		"event name":               `{"traceId":"01","events":[{"name":"` + strings.Repeat("x", 101) + `"}]}`,
	} {
		d, err := Decode([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[`+sp+`]}]}]}`), true, testLimits)
		if err == nil && len(d.Refused) == 0 {
			t.Errorf("%s: decoded", name)
		}
	}
	deepAny := []byte{0x0a, 0x00}
	for range 5000 {
		deepAny = fld(fAnyArray, fld(fListValues, deepAny))
	}
	var deepGroup []byte
	for range 200000 {
		deepGroup = protowire.AppendTag(deepGroup, 99, protowire.StartGroupType)
	}
	for name, b := range map[string][]byte{
		"deep groups":     deepGroup,
		"huge length":     append(protowire.AppendTag(nil, 1, protowire.BytesType), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
		"overlong varint": {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
		"end group":       {0x0c},
		"not UTF-8":       request(nil, nil, cat(spanIDs(0), fld(fSpanName, []byte{0xff}))),
	} {
		if _, err := Decode(b, false, testLimits); err == nil {
			t.Errorf("protobuf %s: decoded", name)
		}
	}
	if d, err := Decode(request(nil, nil, cat(spanIDs(0), fld(fSpanAttributes, kvRaw("d", deepAny)))), false, testLimits); err == nil && len(d.Refused) == 0 {
		t.Error("protobuf: values nested 5,000 deep were decoded")
	}
	for name, b := range map[string]string{
		"deep arrays":  `{"resourceSpans":` + strings.Repeat(`[`, 1e6),
		"deep objects": strings.Repeat(`{"a":`, 1e6),
		"backslash":    `{"resourceSpans":"\`,
		"empty":        ``,
		"scalar":       `1`,
	} {
		if _, err := Decode([]byte(b), true, testLimits); err == nil {
			t.Errorf("json %s: decoded", name)
		}
	}
}
