package judgetest

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// OpenAI is a fake OpenAI Chat Completions endpoint: POST
// {URL}/v1/chat/completions with Content-Type application/json, an
// Authorization bearer key and a body of model, messages and (optionally)
// response_format {"type":"json_schema","json_schema":{"name","strict",
// "schema"}}; it answers a chat.completion object, or an error object
// {"error":{"message","type","param","code"}} with its HTTP status. Its
// base URL for a judge is URL + "/v1".
type OpenAI struct {
	Server
	Model, APIKey string
	// RejectResponseFormat answers a request carrying response_format as a
	// server without structured outputs does: 400, error param
	// "response_format".
	RejectResponseFormat bool
	n                    atomic.Int64
}

// NewOpenAI starts the fake on loopback.
func NewOpenAI(t testing.TB, model, apiKey string) *OpenAI {
	f := &OpenAI{Model: model, APIKey: apiKey}
	f.start(t, f.serve)
	return f
}

// BaseURL is what a judge is configured with.
func (f *OpenAI) BaseURL() string { return f.URL + "/v1" }

// The parameters of the Chat Completions request body that the fake knows
// (a subset of the reference's; the judge sends fewer).
var openAIParams = []string{"model", "messages", "response_format", "temperature", "max_completion_tokens", "seed", "n", "top_p"}

var schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

func (f *OpenAI) check(r *http.Request, body map[string]any) problems {
	var p problems
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		p.add("%s %s, want POST /v1/chat/completions", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		p.add("Content-Type %q", ct)
	}
	if f.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+f.APIKey {
		p.add("Authorization %q, want the bearer API key", r.Header.Get("Authorization"))
	}
	for k := range body {
		if !slices.Contains(openAIParams, k) {
			p.add("unknown body field %q", k)
		}
	}
	if body["model"] != f.Model {
		p.add("model %v, want %q", body["model"], f.Model)
	}
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		p.add("no messages")
	}
	for i, m := range msgs {
		mm, _ := m.(map[string]any)
		role, _ := mm["role"].(string)
		if _, ok := mm["content"].(string); !ok || !slices.Contains([]string{"system", "developer", "user", "assistant"}, role) {
			p.add("messages[%d] is not {role, content}: %v", i, m)
		}
	}
	if len(msgs) > 0 {
		if last, _ := msgs[len(msgs)-1].(map[string]any); last["role"] != "user" {
			p.add("the last message is not the user's")
		}
	}
	if rf, ok := body["response_format"]; ok {
		rfm, _ := rf.(map[string]any)
		js, _ := rfm["json_schema"].(map[string]any)
		name, _ := js["name"].(string)
		schema, _ := js["schema"].(map[string]any)
		switch {
		case rfm["type"] != "json_schema":
			p.add("response_format.type %v", rfm["type"])
		case !schemaName.MatchString(name):
			p.add("response_format.json_schema.name %q", name)
		case js["strict"] != true:
			p.add("response_format.json_schema.strict is not true")
		case schema == nil:
			p.add("response_format.json_schema.schema is not an object")
		default:
			// Strict mode: every property required, no others allowed.
			props, _ := schema["properties"].(map[string]any)
			req, _ := schema["required"].([]any)
			if schema["type"] != "object" || schema["additionalProperties"] != false || len(req) != len(props) {
				p.add("response_format schema is not strict-mode valid: %v", schema)
			}
		}
	}
	return p
}

func (f *OpenAI) serve(w http.ResponseWriter, r *http.Request) {
	body, bad := readJSON(r)
	p := f.check(r, body)
	if bad != "" {
		p.add("%s", bad)
	}
	prompt := ""
	if msgs, ok := body["messages"].([]any); ok && len(msgs) > 0 {
		if last, ok := msgs[len(msgs)-1].(map[string]any); ok {
			prompt, _ = last["content"].(string)
		}
	}
	n := f.record(Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Problem: p.String()})
	if len(p) > 0 {
		answer(w, http.StatusBadRequest, map[string]any{"error": map[string]any{"message": p.String(), "type": "invalid_request_error", "param": nil, "code": nil}})
		return
	}
	if _, ok := body["response_format"]; ok && f.RejectResponseFormat {
		answer(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
			"message": "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
			"type":    "invalid_request_error", "param": "response_format", "code": nil}})
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
		typ := rep.ErrorType
		if typ == "" {
			typ = "server_error"
		}
		var param any
		if rep.ErrorParam != "" {
			param = rep.ErrorParam
		}
		answer(w, rep.Status, map[string]any{"error": map[string]any{"message": rep.Message, "type": typ, "param": param, "code": nil}})
		return
	}
	finish := rep.Finish
	if finish == "" {
		finish = "stop"
	}
	msg := map[string]any{"role": "assistant", "content": grade(rep), "refusal": nil, "annotations": []any{}}
	if rep.Refusal != "" {
		msg["content"], msg["refusal"] = nil, rep.Refusal
	}
	id := f.n.Add(1)
	answer(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", id), "object": "chat.completion", "created": time.Now().Unix(), "model": f.Model,
		"choices":            []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
		"usage":              map[string]any{"prompt_tokens": 200, "completion_tokens": 30, "total_tokens": 230},
		"system_fingerprint": "fp_fake",
	})
}
