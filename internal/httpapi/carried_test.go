package httpapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzCarriedLen: carriedLen counts exactly what encoding/json with HTML
// escaping off (aws-lambda-go's default for a handler's response) makes of
// a body as a string.
func FuzzCarriedLen(f *testing.F) {
	for _, s := range []string{"", `{"a":"b"}`, "<script>&</script>", "\x00\x01\x1f\n\r\t\b\f", "é漢字🙂", "\u2028\u2029", "\xff\xfe", "\\\"", "a\xc3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(b)); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := carriedLen(b, false); got != len(want) {
			t.Fatalf("carriedLen(%q) = %d, encoding/json makes %d bytes", b, got, len(want))
		}
	})
}
