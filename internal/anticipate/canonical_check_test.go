package anticipate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gowebpki/jcs"
)

// canonicalSamples are documents near the edges of JCS: key order by
// UTF-16 code units (a supplementary character sorts before U+E000 and
// after U+D7FF), escapes, numbers ECMAScript writes otherwise, duplicates,
// whitespace, depth.
var canonicalSamples = []string{
	`{}`, `[]`, `""`, `0`, `-0`, `1`, `-1`, `1.5`, `1e21`, `1e+21`, `1E+21`, `1e-7`, `0.000001`, `1e-6`, `100`, `1.0`, `1e2`,
	`123456789012345678901234567890`, `9007199254740993`, `1e400`, `-1e-400`, `0.1`, `5e-324`, `1.7976931348623157e+308`,
	`true`, `false`, `null`, `tru`, `nul`, `01`, `-`, `1.`, `.1`, `1e`, `+1`,
	`{"a":1,"b":2}`, `{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a":1, "b":2}`, ` {"a":1}`, `{"a":1} `, `{"a":1}x`,
	`{"\u0000":1}`, `{"\u001f":1,"\u001e":2}`, `{"\b":1,"\t":2}`, `{"\t":1,"\b":2}`, `{"\u0008":1}`, `{"\u000A":1}`, `{"\u000a":1}`,
	`"\u0041"`, `"\/"`, `"/"`, `"\u007f"`, "\"\x7f\"", `"\u2028"`, "\"\u2028\"", `"\ud83d\ude00"`, "\"😀\"", "\"\xff\"", "\"\xed\xa0\x80\"",
	"{\"\ue000\":1,\"😀\":2}", "{\"😀\":1,\"\ue000\":2}", "{\"\ud7ff\":1,\"😀\":2}", "{\"😀\":1,\"\ud7ff\":2}",
	`{"a":{"b":[1,2,{"c":"d"}]},"e":[]}`, `[1,2,]`, `[,]`, `{"a"}`, `{"a":}`, `{,}`, `["a" ,1]`,
	`{"plan_id":"p","event_type":"TOOL_REQUEST","arguments":{"user":"alice"},"count":3,"score":0.25}`,
	"\"a\nb\"", `"a\nb"`, `"\n"`, `"\u000d"`, `"\r"`, `"\""`, `"\\"`, `"\u005c"`, `"\u0022"`,
}

// TestIsCanonicalAgreesWithJCS: what isCanonical accepts, jcs.Transform
// returns unchanged; and what jcs.Transform returns, isCanonical accepts
// (so the fast path serves every canonical document).
func TestIsCanonicalAgreesWithJCS(t *testing.T) {
	deep := bytes.Repeat([]byte("["), 10001)
	deep = append(deep, bytes.Repeat([]byte("]"), 10001)...)
	atBound := bytes.Repeat([]byte("["), 10000)
	atBound = append(atBound, bytes.Repeat([]byte("]"), 10000)...)
	samples := append([]string{string(deep), string(atBound)}, canonicalSamples...)
	for _, s := range samples {
		checkCanonicalAgreement(t, []byte(s))
	}
	// Documents as OTLP ingest writes them (encoding/json of a map, HTML
	// escaping off) are canonical, so the ingest path skips the transform.
	for _, v := range []map[string]any{
		{"event_type": "TOOL_REQUEST", "tool": "iam_create_user", "arguments": map[string]any{"user": "alice <a@b.c> & co"}, "observations": []any{1.5, int64(3), "x"}},
		{"b": 1e21, "a": 1e-7, "c": -0.5, "d": 123456.789},
	} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		b := bytes.TrimRight(buf.Bytes(), "\n")
		if !isCanonical(b) {
			t.Errorf("encoding/json's %s is not taken as canonical", b)
		}
		checkCanonicalAgreement(t, b)
	}
}

func checkCanonicalAgreement(t *testing.T, b []byte) {
	t.Helper()
	out, err := jcs.Transform(b)
	if isCanonical(b) && (err != nil || !bytes.Equal(out, b)) {
		t.Fatalf("isCanonical accepts %q, which JCS turns into %q (%v)", b, out, err)
	}
	if err == nil && !isCanonical(out) {
		t.Fatalf("isCanonical refuses JCS's own output %q (of %q)", out, b)
	}
}

func FuzzIsCanonical(f *testing.F) {
	for _, s := range canonicalSamples {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkCanonicalAgreement(t, b)
	})
}
