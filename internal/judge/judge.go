// Package judge grades HEURISTIC criteria with a model, three ways chosen by
// configuration (see New): Client, any HTTP endpoint speaking this
// project's judge protocol; OpenAI, any OpenAI-compatible Chat Completions
// endpoint; Bedrock, Amazon Bedrock's Converse API. Every judge returns a
// grade only when it got one: anything else (an error status, throttling
// past the bounded retries, a timeout, a refusal, an answer that is not a
// score in [0, 1]) is an error, and the criterion stays PENDING with the
// reason: never a silent pass. A grade carries who graded (GradedBy) and
// the digest of the request that got it (PromptDigest).
package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// Client calls one endpoint of this project's judge protocol: a POST of
// anticipate.JudgeRequest as JSON, answered 200 with
// anticipate.JudgeResponse ({"score": 0..1, "rationale": "..."}). Its
// grades are graded_by "model:judge".
type Client struct {
	URL     string
	HTTP    *http.Client
	Timeout time.Duration
	// Token, when set, is sent as a bearer token.
	Token string
}

// GradedByJudge is the graded_by of Client's grades.
const GradedByJudge = "model:judge"

// Judge sends one request and validates the answer.
func (c *Client) Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("judge URL: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.Token)
	}
	res, err := c.HTTP.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("judge unreachable: %w", err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("judge answer unreadable: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("judge answered HTTP %d", res.StatusCode)
	}
	out, err := anticipate.ValidateJudgeResponse(raw)
	if err != nil {
		return nil, fmt.Errorf("judge answer rejected: %w: %w", anticipate.ErrNotAGrade, err)
	}
	if out.PromptDigest, err = Digest(req); err != nil {
		return nil, err
	}
	out.GradedBy = GradedByJudge
	return out, nil
}
