// Package judge calls a model judge over HTTP to grade HEURISTIC criteria.
// The judge is any HTTP endpoint that accepts a POST of
// anticipate.JudgeRequest as JSON and answers 200 with
// anticipate.JudgeResponse ({"score": 0..1, "rationale": "..."}). Anything
// else (an error status, a timeout, a malformed or out-of-range answer) is
// an error, and the criterion stays PENDING with the reason: never a
// silent pass.
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

// Client calls one judge endpoint.
type Client struct {
	URL     string
	HTTP    *http.Client
	Timeout time.Duration
	// Token, when set, is sent as a bearer token.
	Token string
}

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
		return nil, fmt.Errorf("judge answer rejected: %w", err)
	}
	return out, nil
}
