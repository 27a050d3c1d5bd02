package judgetest

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// Bedrock is a fake Amazon Bedrock Runtime serving Converse: POST
// /model/{modelId}/converse (modelId URL-encoded), SigV4-signed for the
// service "bedrock" (Authorization AWS4-HMAC-SHA256 with a credential
// scope ending in /bedrock/aws4_request, X-Amz-Date), a JSON body of
// messages, system and inferenceConfig; it answers the ConverseResponse
// (output.message, stopReason, usage, metrics) or a restJson1 error: the
// HTTP status, X-Amzn-ErrorType naming the exception and {"message"}.
// The signature itself is not verified (the fake does not hold the
// caller's secret key; any credentials sign).
type Bedrock struct {
	Server
	Model string
}

// NewBedrock starts the fake on loopback.
func NewBedrock(t testing.TB, model string) *Bedrock {
	f := &Bedrock{Model: model}
	f.start(t, f.serve)
	return f
}

var converseFields = []string{"messages", "system", "inferenceConfig", "toolConfig", "guardrailConfig",
	"additionalModelRequestFields", "promptVariables", "additionalModelResponseFieldPaths", "requestMetadata", "performanceConfig", "outputConfig", "serviceTier"}

func (f *Bedrock) check(r *http.Request, body map[string]any) problems {
	var p problems
	// modelId is a URI label: percent-encoded in the path (the SDK encodes
	// ":" too), compared decoded.
	want := "/model/" + f.Model + "/converse"
	if r.Method != http.MethodPost || r.URL.Path != want {
		p.add("%s %s, want POST %s", r.Method, r.URL.Path, want)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		p.add("Content-Type %q", ct)
	}
	az := r.Header.Get("Authorization")
	if !strings.HasPrefix(az, "AWS4-HMAC-SHA256 Credential=") || !strings.Contains(az, "/bedrock/aws4_request") ||
		!strings.Contains(az, "SignedHeaders=") || !strings.Contains(az, "Signature=") {
		p.add("Authorization is not a SigV4 signature for bedrock: %q", az)
	}
	if r.Header.Get("X-Amz-Date") == "" {
		p.add("no X-Amz-Date")
	}
	for k := range body {
		if !slices.Contains(converseFields, k) {
			p.add("unknown body field %q", k)
		}
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		p.add("no messages")
	}
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		content, _ := mm["content"].([]any)
		if (mm["role"] != "user" && mm["role"] != "assistant") || len(content) == 0 {
			p.add("messages[%d] is not {role, content[]}: %v", i, m)
		}
	}
	if sys, ok := body["system"]; ok {
		blocks, _ := sys.([]any)
		for i, b := range blocks {
			if bm, _ := b.(map[string]any); bm["text"] == nil {
				p.add("system[%d] has no text", i)
			}
		}
	}
	if ic, ok := body["inferenceConfig"].(map[string]any); ok {
		for k := range ic {
			if !slices.Contains([]string{"maxTokens", "temperature", "topP", "stopSequences"}, k) {
				p.add("unknown inferenceConfig field %q", k)
			}
		}
	}
	return p
}

func (f *Bedrock) serve(w http.ResponseWriter, r *http.Request) {
	body, bad := readJSON(r)
	p := f.check(r, body)
	if bad != "" {
		p.add("%s", bad)
	}
	prompt := ""
	if msgs, ok := body["messages"].([]any); ok && len(msgs) > 0 {
		if last, ok := msgs[len(msgs)-1].(map[string]any); ok {
			if content, ok := last["content"].([]any); ok && len(content) > 0 {
				if c, ok := content[0].(map[string]any); ok {
					prompt, _ = c["text"].(string)
				}
			}
		}
	}
	n := f.record(Request{Path: r.URL.EscapedPath(), Header: r.Header.Clone(), Body: body, Problem: p.String()})
	if len(p) > 0 {
		bedrockError(w, http.StatusBadRequest, "ValidationException", p.String())
		return
	}
	rep := f.reply(n, criterionOf(prompt))
	if !wait(r, rep.Delay) {
		return
	}
	if rep.Status != 0 && rep.Status != http.StatusOK {
		if rep.RetryAfter != "" {
			w.Header().Set("Retry-After", rep.RetryAfter)
		}
		bedrockError(w, rep.Status, rep.ErrorType, rep.Message)
		return
	}
	stop := rep.Finish
	if stop == "" {
		stop = "end_turn"
	}
	answer(w, http.StatusOK, map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": []any{map[string]any{"text": grade(rep)}}}},
		"stopReason": stop,
		"usage":      map[string]any{"inputTokens": 200, "outputTokens": 30, "totalTokens": 230},
		"metrics":    map[string]any{"latencyMs": 1},
	})
}

func bedrockError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("X-Amzn-ErrorType", typ)
	answer(w, status, map[string]any{"message": msg})
}
