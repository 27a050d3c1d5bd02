package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
)

// Health calls GET /healthz (no token). It returns nil when the server
// answers 200, else an *Error or a transport error.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, call{method: "GET", path: "/healthz", public: true})
}

// OpenAPI returns the server's OpenAPI 3.1 document (GET /openapi.json, no
// token) as it is served. Errors: an *Error for a non-2xx answer, or a
// transport error.
func (c *Client) OpenAPI(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, call{method: "GET", path: "/openapi.json", public: true, out: &out})
	return out, err
}

// PutCard registers or replaces the A2A agent card of agentID (PUT
// /v1/agents/{agentId}). card is the A2A card (1.0 or 0.3) declaring the
// extension: a json.RawMessage or []byte sent as it is, or any value
// encoding/json turns into one (the A2A Go SDK's AgentCard, a map). It
// returns the card as stored. Errors (*Error): 400 naming the failing card
// field, 401, 403, 413.
func (c *Client) PutCard(ctx context.Context, agentID string, card any) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, call{method: "PUT", path: "/v1/agents/" + seg(agentID), body: card, out: &out})
	return out, err
}

// Card returns the stored card of agentID (GET /v1/agents/{agentId}).
// Errors (*Error): 404 when the agent has no card, 400, 401, 403.
func (c *Client) Card(ctx context.Context, agentID string) (json.RawMessage, error) {
	var out json.RawMessage
	err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID), out: &out})
	return out, err
}

// Raise raises the expectations of req for agentID, all or nothing (POST
// /v1/agents/{agentId}/expectations), and returns one record per
// expectation. Raising an id again with an identical body returns the
// stored record, so retries are safe. Errors (*Error): 400 naming every
// failing field (nothing raised), 404 when the agent has no card, 409 when
// an id was raised with another body, 401, 403, 413.
func (c *Client) Raise(ctx context.Context, agentID string, req RaiseRequest) ([]Record, error) {
	var out RecordsPage
	err := c.do(ctx, call{method: "POST", path: "/v1/agents/" + seg(agentID) + "/expectations", body: &req, out: &out})
	return out.Records, err
}

// Expectation returns the record of one expectation (GET
// /v1/agents/{agentId}/expectations/{id}). Errors (*Error): 404, 400, 401,
// 403.
func (c *Client) Expectation(ctx context.Context, agentID, expectationID string) (*Record, error) {
	var out Record
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/expectations/" + seg(expectationID), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListExpectations returns one page of agentID's records matching opts (GET
// /v1/agents/{agentId}/expectations); pass the page's NextToken in
// opts.NextToken for the next. Errors (*Error): 400 naming a bad filter or
// token, 404, 401, 403.
func (c *Client) ListExpectations(ctx context.Context, agentID string, opts ListOptions) (*RecordsPage, error) {
	q := url.Values{}
	if opts.State != "" {
		q.Set("state", opts.State)
	}
	if opts.SubjectType != "" {
		q.Set("subjectType", opts.SubjectType)
	}
	if opts.SubjectID != "" {
		q.Set("subjectId", opts.SubjectID)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.NextToken != "" {
		q.Set("nextToken", opts.NextToken)
	}
	var out RecordsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/expectations", query: q.Encode(), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// factsRequest is the body of ReportFacts.
type factsRequest struct {
	Facts []Fact `json:"facts"`
}

// ReportFacts reports facts for agentID (POST /v1/agents/{agentId}/facts)
// and returns, per fact, the expectations it satisfied. Reporting the same
// fact again changes nothing, so retries are safe (a retry whose first
// attempt was processed answers with what the fact satisfies then: the ids
// it satisfied already are not listed again). Errors (*Error): 400 naming
// the failing field (nothing changed), 404, 401, 403, 413.
func (c *Client) ReportFacts(ctx context.Context, agentID string, facts ...Fact) ([]FactOutcome, error) {
	var out struct {
		Facts []FactOutcome `json:"facts"`
	}
	err := c.do(ctx, call{method: "POST", path: "/v1/agents/" + seg(agentID) + "/facts", body: &factsRequest{Facts: facts}, out: &out})
	return out.Facts, err
}

// withdrawRequest is the body of Withdraw.
type withdrawRequest struct {
	Withdraw []string `json:"withdraw"`
	Reason   string   `json:"reason,omitempty"`
}

// Withdraw withdraws expectations of agentID (POST
// /v1/agents/{agentId}/withdrawals) and returns their records. Withdrawing
// a withdrawn expectation is a no-op, so retries are safe. Errors (*Error):
// 409 when one is satisfied or lapsed, 404, 400, 401, 403, 413.
func (c *Client) Withdraw(ctx context.Context, agentID, reason string, expectationIDs ...string) ([]Record, error) {
	var out RecordsPage
	err := c.do(ctx, call{method: "POST", path: "/v1/agents/" + seg(agentID) + "/withdrawals", body: &withdrawRequest{Withdraw: expectationIDs, Reason: reason}, out: &out})
	return out.Records, err
}

// PushA2A posts an A2A payload (a StreamResponse, a bare Task, or an A2A
// 0.3 event; any JSON-encodable value, json.RawMessage sent as it is) to
// POST /v1/agents/{agentId}/a2a, which raises, reports, withdraws and
// cancels what its extension metadata says. Errors (*Error): as Raise,
// ReportFacts and Withdraw for what the payload carries.
func (c *Client) PushA2A(ctx context.Context, agentID string, payload any) (*A2AResult, error) {
	var out A2AResult
	if err := c.do(ctx, call{method: "POST", path: "/v1/agents/" + seg(agentID) + "/a2a", body: payload, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Redeliver puts a dead-lettered or suppressed lapse back in the outbox
// with a fresh attempt budget and the same messageId (POST
// /v1/agents/{agentId}/expectations/{id}/redeliver); an already delivered
// one is returned as it is. Errors (*Error): 409 when the expectation has
// not lapsed, 404, 400, 401, 403.
func (c *Client) Redeliver(ctx context.Context, agentID, expectationID string) (*Record, error) {
	var out Record
	if err := c.do(ctx, call{method: "POST", path: "/v1/agents/" + seg(agentID) + "/expectations/" + seg(expectationID) + "/redeliver", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Acknowledge records the token's principal's acknowledgement of a lapse,
// with an optional note (POST /v1/agents/{agentId}/expectations/{id}/ack):
// the lapse's alert channels are told (PagerDuty: acknowledge). The first
// acknowledgement stands; a second returns the record as it is. Errors
// (*Error): 409 when the expectation has not lapsed, 400 naming "note",
// 404, 401, 403.
func (c *Client) Acknowledge(ctx context.Context, agentID, expectationID, note string) (*Record, error) {
	var out Record
	if err := c.do(ctx, call{method: "POST", path: "/v1/agents/" + seg(agentID) + "/expectations/" + seg(expectationID) + "/ack",
		body: map[string]string{"note": note}, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeadLetters returns the dead-lettered records of the agents the token may
// act for (GET /v1/deadletters). Errors (*Error): 401, 403.
func (c *Client) DeadLetters(ctx context.Context) ([]Record, error) {
	var out RecordsPage
	err := c.do(ctx, call{method: "GET", path: "/v1/deadletters", out: &out})
	return out.Records, err
}

type configured struct {
	Configured []string `json:"configured"`
}

// PutCredentials replaces all of agentID's outbound credentials, by
// security scheme name of its card (PUT /v1/agents/{agentId}/credentials),
// and returns the scheme names configured. Errors (*Error): 400 naming the
// field (credentials.<scheme>.<field>), 404 without a card, 503 when the
// server keeps no credentials, 401, 403, 413.
func (c *Client) PutCredentials(ctx context.Context, agentID string, creds map[string]Credential) ([]string, error) {
	var out configured
	body := struct {
		Credentials map[string]Credential `json:"credentials"`
	}{creds}
	err := c.do(ctx, call{method: "PUT", path: "/v1/agents/" + seg(agentID) + "/credentials", body: &body, out: &out})
	return out.Configured, err
}

// Credentials returns the scheme names agentID has credentials for, never a
// secret (GET /v1/agents/{agentId}/credentials). Errors (*Error): 404
// without a card, 503, 400, 401, 403.
func (c *Client) Credentials(ctx context.Context, agentID string) ([]string, error) {
	var out configured
	err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/credentials", out: &out})
	return out.Configured, err
}

// DeleteCredentials deletes all of agentID's outbound credentials (DELETE
// /v1/agents/{agentId}/credentials). Errors (*Error): 404 without a card,
// 503, 400, 401, 403.
func (c *Client) DeleteCredentials(ctx context.Context, agentID string) error {
	return c.do(ctx, call{method: "DELETE", path: "/v1/agents/" + seg(agentID) + "/credentials"})
}
