package judge

import (
	"strings"
	"testing"
)

// FuzzParseAnswer feeds a model's text to the strict parser: it never
// panics, and what it accepts is a score in [0, 1] from exactly one JSON
// object.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"score": 0.8, "rationale": "ok"}`, "```json\n{\"score\": 1, \"rationale\": \"\"}\n```", `{"score": 1.5}`,
		`{"score": "0.8"}`, `I give it 0.8`, `{"score": 0.1} {"score": 0.9}`, "```\n{\"score\":0}", `{"score": 1e-400}`, `[]`, "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		resp, err := parseAnswer(text)
		if err != nil {
			if resp != nil || !strings.Contains(err.Error(), errNotAScore.Error()) {
				t.Fatalf("error %v with %v", err, resp)
			}
			return
		}
		if resp.Score < 0 || resp.Score > 1 {
			t.Fatalf("accepted score %v from %q", resp.Score, text)
		}
	})
}
