package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// OpenAI grades with any OpenAI-compatible Chat Completions endpoint
// (POST {BaseURL}/chat/completions: OpenAI, Azure OpenAI's v1 API, vLLM,
// Ollama, LiteLLM and others).
//
// The request asks for a structured answer with response_format
// {"type":"json_schema","json_schema":{"name","strict":true,"schema"}}; a
// server that answers 400 with an error naming response_format (or
// json_schema) is asked once more without it, and the prompt's own
// instruction to answer with the JSON object is then relied on. Either way
// the content is parsed strictly (parseAnswer). A 429 or 5xx is retried up
// to MaxAttempts in all, waiting what Retry-After says (or a short backoff)
// unless that is longer than MaxRetryWait or the time left; everything
// else that is not a grade (another status, an {"error":{...}} body, a
// refusal, finish_reason length or content_filter, no choice, a timeout,
// an answer that is not a score) is an error, which leaves the criterion
// PENDING with the reason.
type OpenAI struct {
	// BaseURL is the API's base, e.g. https://api.openai.com/v1 or
	// http://127.0.0.1:11434/v1; "/chat/completions" is appended.
	BaseURL string
	// Model is the model name sent as "model".
	Model string
	// APIKey, when set, is sent as a bearer token.
	APIKey string
	HTTP   *http.Client
	// Timeout bounds one criterion's grading, retries included (default
	// DefaultTimeout).
	Timeout time.Duration
	// MaxAttempts bounds the attempts on 429 and 5xx (default 3).
	MaxAttempts int
	// MaxRetryWait bounds one wait before a retry (default 20 s).
	MaxRetryWait time.Duration
}

// DefaultTimeout bounds one criterion's grading by a judge.
const DefaultTimeout = 30 * time.Second

// openAIRequest is the Chat Completions request body.
type openAIRequest struct {
	Model          string          `json:"model"`
	Messages       []openAIMessage `json:"messages"`
	ResponseFormat *responseFormat `json:"response_format,omitempty"`
}

type openAIMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

type jsonSchema struct {
	Name   string         `json:"name"`
	Strict bool           `json:"strict"`
	Schema map[string]any `json:"schema"`
}

// openAIResponse is what is read of a chat.completion.
type openAIResponse struct {
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Error *openAIError `json:"error"`
}

type openAIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param"`
	Code    any    `json:"code"`
}

// openAIRequestFor builds the request body for req.
func (c *OpenAI) openAIRequestFor(req anticipate.JudgeRequest, structured bool) (*openAIRequest, error) {
	user, err := userPrompt(req)
	if err != nil {
		return nil, err
	}
	body := &openAIRequest{Model: c.Model, Messages: []openAIMessage{{Role: "system", Content: systemPrompt}, {Role: "user", Content: user}}}
	if structured {
		body.ResponseFormat = &responseFormat{Type: "json_schema", JSONSchema: jsonSchema{Name: "criterion_grade", Strict: true, Schema: answerSchema}}
	}
	return body, nil
}

// GradedBy is the graded_by of this judge's grades: "model:openai:" and
// the model name.
func (c *OpenAI) GradedBy() string { return "model:openai:" + c.Model }

// Judge grades one criterion (see OpenAI).
func (c *OpenAI) Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := c.openAIRequestFor(req, true)
	if err != nil {
		return nil, err
	}
	text, err := c.complete(ctx, body)
	var fe *formatRefused
	if errors.As(err, &fe) {
		body.ResponseFormat = nil
		text, err = c.complete(ctx, body)
	}
	if err != nil {
		return nil, err
	}
	resp, err := parseAnswer(text)
	if err != nil {
		return nil, err
	}
	if resp.PromptDigest, err = Digest(body); err != nil {
		return nil, err
	}
	resp.GradedBy = c.GradedBy()
	return resp, nil
}

// formatRefused is a 400 whose error names response_format: the server does
// not take structured outputs (or not this schema).
type formatRefused struct{ msg string }

func (e *formatRefused) Error() string { return e.msg }

// complete sends body, retrying 429 and 5xx within bounds, and returns the
// first choice's content.
func (c *OpenAI) complete(ctx context.Context, body *openAIRequest) (string, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	attempts := c.MaxAttempts
	if attempts <= 0 {
		attempts = 3
	}
	maxWait := c.MaxRetryWait
	if maxWait <= 0 {
		maxWait = 20 * time.Second
	}
	url := strings.TrimRight(c.BaseURL, "/") + "/chat/completions"
	for attempt := 1; ; attempt++ {
		text, retryAfter, err := c.once(ctx, url, raw)
		if err == nil {
			return text, nil
		}
		var st *statusError
		if !errors.As(err, &st) || !st.retryable() {
			return "", err
		}
		if attempt >= attempts {
			return "", fmt.Errorf("%w (gave up after %d attempts)", err, attempts)
		}
		wait := retryAfter
		if wait < 0 {
			wait = time.Duration(attempt) * 500 * time.Millisecond
		}
		if wait > maxWait {
			return "", fmt.Errorf("%w: asked to retry after %s, more than the %s this judge waits", err, wait, maxWait)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return "", fmt.Errorf("%w: asked to retry after %s, past the judge's timeout", err, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", fmt.Errorf("judge timed out: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// statusError is an HTTP error answer of the endpoint.
type statusError struct {
	status int
	detail string
}

func (e *statusError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("the model endpoint answered HTTP %d", e.status)
	}
	return fmt.Sprintf("the model endpoint answered HTTP %d: %s", e.status, e.detail)
}

func (e *statusError) retryable() bool {
	return e.status == http.StatusTooManyRequests || e.status >= 500
}

// once sends one request. It returns the content, or an error and the
// Retry-After of the answer (-1 when it has none).
func (c *OpenAI) once(ctx context.Context, url string, body []byte) (string, time.Duration, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", -1, fmt.Errorf("judge URL: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if c.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	res, err := c.HTTP.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return "", -1, fmt.Errorf("judge timed out: %w", err)
		}
		return "", -1, fmt.Errorf("model endpoint unreachable: %w", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return "", -1, fmt.Errorf("model answer unreadable: %w", err)
	}
	var out openAIResponse
	jsonErr := json.Unmarshal(raw, &out)
	if res.StatusCode != http.StatusOK {
		st := &statusError{status: res.StatusCode}
		if jsonErr == nil && out.Error != nil {
			st.detail = clip(out.Error.Message)
			if out.Error.Type != "" {
				st.detail += " (" + out.Error.Type + ")"
			}
			if res.StatusCode == http.StatusBadRequest && namesResponseFormat(out.Error) {
				return "", -1, &formatRefused{msg: st.Error()}
			}
		}
		return "", retryAfter(res.Header.Get("Retry-After"), time.Now()), st
	}
	if jsonErr != nil {
		return "", -1, fmt.Errorf("%w: the completion is not JSON: %v", errNotAScore, jsonErr)
	}
	if out.Error != nil {
		return "", -1, fmt.Errorf("the model endpoint answered an error: %s", clip(out.Error.Message))
	}
	if len(out.Choices) == 0 {
		return "", -1, fmt.Errorf("%w: the completion has no choices", errNotAScore)
	}
	ch := out.Choices[0]
	if ch.Message.Refusal != nil && *ch.Message.Refusal != "" {
		return "", -1, fmt.Errorf("the model refused: %s", clip(*ch.Message.Refusal))
	}
	switch ch.FinishReason {
	case "stop", "":
	case "length":
		return "", -1, fmt.Errorf("%w: the answer was cut at the token limit (finish_reason length)", errNotAScore)
	case "content_filter":
		return "", -1, errors.New("the answer was withheld by the content filter (finish_reason content_filter)")
	default:
		return "", -1, fmt.Errorf("%w: finish_reason %q", errNotAScore, ch.FinishReason)
	}
	if ch.Message.Content == nil {
		return "", -1, fmt.Errorf("%w: the message has no content", errNotAScore)
	}
	return *ch.Message.Content, -1, nil
}

// namesResponseFormat reports whether a 400's error is about
// response_format: the parameter it names, or its message.
func namesResponseFormat(e *openAIError) bool {
	if strings.HasPrefix(e.Param, "response_format") {
		return true
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "response_format") || strings.Contains(m, "json_schema")
}

// retryAfter parses a Retry-After header (seconds or an HTTP date); -1
// when there is none or it does not parse.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return -1
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
		return 0
	}
	return -1
}
