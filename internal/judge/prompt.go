package judge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// The prompt the model judges (OpenAI-compatible and Bedrock) send: the
// same instructions and the same user message on both, so one criterion is
// asked the same question whichever service answers it.

// systemPrompt tells the model what it is grading and how to answer.
const systemPrompt = `You grade one criterion of an AI agent's execution, after the fact, for an audit record.
You are given the criterion (its description and its assertion, a statement that should hold) and the evidence of the execution (counts and timing of its steps, the tools it invoked, and the outcome variables it reported).
Judge only from the evidence given. If the evidence does not show that the assertion holds, score it low.
Answer with one JSON object and nothing else: {"score": S, "rationale": R}, where S is a number from 0 (the assertion clearly does not hold) to 1 (it clearly holds), and R is one or two sentences (at most 500 characters) that say why, citing the evidence.`

// userPrompt is the user message for one criterion: its description,
// assertion and evidence as JSON (the evidence's keys in a fixed order, so
// the same request is the same prompt).
func userPrompt(req anticipate.JudgeRequest) (string, error) {
	ev, err := json.Marshal(req.Evidence)
	if err != nil {
		return "", err
	}
	canon, err := jcs.Transform(ev)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Criterion %s\nDescription: %s\nAssertion: %s\n\nEvidence of the execution (JSON):\n%s\n",
		req.CriterionID, req.Description, req.Assertion, canon)
	return b.String(), nil
}

// answerSchema is the JSON schema of the answer. It uses only what strict
// structured outputs accept everywhere (no numeric bounds: the range is
// checked on receipt).
var answerSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"score":     map[string]any{"type": "number", "description": "0 (does not hold) to 1 (holds)"},
		"rationale": map[string]any{"type": "string", "description": "why, citing the evidence"},
	},
	"required":             []string{"score", "rationale"},
	"additionalProperties": false,
}

// errNotAScore wraps every answer that is not a grade.
var errNotAScore = fmt.Errorf("%w: the answer is not a score", anticipate.ErrNotAGrade)

// parseAnswer reads a model's answer strictly: one JSON object with a
// numeric score in [0, 1] and an optional string rationale
// (anticipate.ValidateJudgeResponse), nothing before or after it. One
// surrounding Markdown code fence (```json ... ```), which models add even
// when told not to, is the only wrapping removed.
func parseAnswer(text string) (*anticipate.JudgeResponse, error) {
	t := strings.TrimSpace(text)
	if rest, ok := strings.CutPrefix(t, "```"); ok {
		rest = strings.TrimPrefix(rest, "json")
		inner, ok := strings.CutSuffix(strings.TrimSpace(rest), "```")
		if !ok {
			return nil, fmt.Errorf("%w: an unclosed code fence", errNotAScore)
		}
		t = strings.TrimSpace(inner)
	}
	if t == "" {
		return nil, fmt.Errorf("%w: the answer is empty", errNotAScore)
	}
	dec := json.NewDecoder(strings.NewReader(t))
	var obj json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		return nil, fmt.Errorf("%w: %q is not a JSON object", errNotAScore, clip(t))
	}
	if dec.More() || strings.TrimSpace(t[dec.InputOffset():]) != "" {
		return nil, fmt.Errorf("%w: text after the JSON object in %q", errNotAScore, clip(t))
	}
	resp, err := anticipate.ValidateJudgeResponse(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNotAScore, err)
	}
	return resp, nil
}

// Digest returns "sha256:" and the lowercase hex SHA-256 of the RFC 8785
// (JCS) form of v's JSON: the prompt_digest of a model grade, computed over
// the request body that produced the grade, so the same request can be sent
// again and checked against it.
func Digest(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// clip shortens a model's text for an error message.
func clip(s string) string {
	n := 200
	s = string(bytes.ToValidUTF8([]byte(s), []byte("?")))
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
