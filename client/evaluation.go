package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gowebpki/jcs"
)

// Sign returns msg (an ANTICIPATE: an *Anticipate, a map, or JSON bytes)
// as RFC 8785 canonical JSON with its d_dna_signature set to what the
// server requires: "sha256:" and the lowercase hex SHA-256 of the canonical
// JSON of the message without d_dna_signature. It returns an error when msg
// does not encode to a JSON object valid for RFC 8785.
func Sign(msg any) (json.RawMessage, error) {
	var raw []byte
	switch m := msg.(type) {
	case json.RawMessage:
		raw = m
	case []byte:
		raw = m
	default:
		b, err := json.Marshal(msg)
		if err != nil {
			return nil, fmt.Errorf("client: sign: %w", err)
		}
		raw = b
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("client: sign: the message must be a JSON object: %w", err)
	}
	delete(fields, "d_dna_signature")
	unsigned, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("client: sign: %w", err)
	}
	canon, err := jcs.Transform(unsigned)
	if err != nil {
		return nil, fmt.Errorf("client: sign: %w", err)
	}
	sum := sha256.Sum256(canon)
	fields["d_dna_signature"], _ = json.Marshal("sha256:" + hex.EncodeToString(sum[:]))
	signed, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("client: sign: %w", err)
	}
	out, err := jcs.Transform(signed)
	if err != nil {
		return nil, fmt.Errorf("client: sign: %w", err)
	}
	return out, nil
}

// DeclareAnticipation declares an ANTICIPATE (POST /v1/anticipations):
// anticipate is an *Anticipate, a map or JSON bytes, signed (see Sign). An
// identical re-submission answers 200 with Created false, so retries are
// safe. Errors (*Error): 400 naming the failing field (a wrong
// d_dna_signature says how to compute it), 409 when the id is taken by
// another body or the plan has begun, 401, 403, 413.
func (c *Client) DeclareAnticipation(ctx context.Context, anticipate any) (*Declared, error) {
	var out Declared
	var status int
	if err := c.do(ctx, call{method: "POST", path: "/v1/anticipations", body: anticipate, out: &out, status: &status}); err != nil {
		return nil, err
	}
	out.Created = status == http.StatusCreated
	return &out, nil
}

// ReplaceAnticipation replaces the ANTICIPATE id before its plan begins
// (PUT /v1/anticipations/{id}). Errors (*Error): 409 once sealed, 404, 400,
// 401, 403, 413.
func (c *Client) ReplaceAnticipation(ctx context.Context, id string, anticipate any) (*Declared, error) {
	var out Declared
	if err := c.do(ctx, call{method: "PUT", path: "/v1/anticipations/" + seg(id), body: anticipate, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Anticipation returns a stored ANTICIPATE and its state (GET
// /v1/anticipations/{id}). Errors (*Error): 404, 400, 401, 403.
func (c *Client) Anticipation(ctx context.Context, id string) (*Anticipation, error) {
	var out Anticipation
	if err := c.do(ctx, call{method: "GET", path: "/v1/anticipations/" + seg(id), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Verifications returns the VERIFYs of an ANTICIPATE (GET
// /v1/anticipations/{id}/verifications). Errors (*Error): 404, 400, 401,
// 403.
func (c *Client) Verifications(ctx context.Context, anticipationID string) ([]Verification, error) {
	var out struct {
		Verifications []Verification `json:"verifications"`
	}
	err := c.do(ctx, call{method: "GET", path: "/v1/anticipations/" + seg(anticipationID) + "/verifications", out: &out})
	return out.Verifications, err
}

// AppendEvent appends an execution event to planID's chain (POST
// /v1/executions/{planId}/events): event is an *Event, a map or JSON bytes
// (sent as they are). A repeated event_id with the same body returns the
// stored answer, so retries are safe. Errors (*Error): 400 naming the
// failing field, 404 when no ANTICIPATE binds the plan, 409 after
// PLAN_COMPLETE or for an event_id reused with another body, 401, 403, 413.
func (c *Client) AppendEvent(ctx context.Context, planID string, event any) (*Appended, error) {
	var out Appended
	if err := c.do(ctx, call{method: "POST", path: "/v1/executions/" + seg(planID) + "/events", body: event, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListEvents returns one page of planID's chain in order (GET
// /v1/executions/{planId}/events); pass the page's NextToken in
// opts.NextToken for the next. Errors (*Error): 404, 400 naming limit or
// nextToken, 401, 403.
func (c *Client) ListEvents(ctx context.Context, planID string, opts EventsOptions) (*EventsPage, error) {
	q := url.Values{}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.NextToken != "" {
		q.Set("nextToken", opts.NextToken)
	}
	var out EventsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/executions/" + seg(planID) + "/events", query: q.Encode(), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Verification returns one VERIFY (GET /v1/verifications/{id}). Errors
// (*Error): 404, 400, 401, 403.
func (c *Client) Verification(ctx context.Context, verificationID string) (*Verification, error) {
	var out Verification
	if err := c.do(ctx, call{method: "GET", path: "/v1/verifications/" + seg(verificationID), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// SubmitGrade records a human grade (POST
// /v1/verifications/{id}/grades) and returns the VERIFY graded again. It is
// not idempotent (a second submission is a 409), so it is retried only on
// a 429 or a connection that could not be opened. Errors (*Error): 409 when
// the criterion is graded or the VERIFY final, 400 naming the field, 404,
// 401, 403, 413.
func (c *Client) SubmitGrade(ctx context.Context, verificationID string, g Grade) (*Verification, error) {
	var out Verification
	if err := c.do(ctx, call{method: "POST", path: "/v1/verifications/" + seg(verificationID) + "/grades", body: &g, out: &out, once: true}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Bundle writes the evidence bundle of a VERIFY, for the offline verifier,
// to w as the server streams it (GET /v1/verifications/{id}/bundle). A
// failure after the first byte reached w is not retried. Errors (*Error):
// 404, 413 over the AWS bound, 400, 401, 403; or w's error.
func (c *Client) Bundle(ctx context.Context, verificationID string, w io.Writer) error {
	return c.do(ctx, call{method: "GET", path: "/v1/verifications/" + seg(verificationID) + "/bundle", stream: w})
}

// VerifyKey returns the public key that signs VERIFY messages (GET
// /v1/keys/verify). Errors (*Error): 404 when the server does not sign,
// 401, 403.
func (c *Client) VerifyKey(ctx context.Context) (*VerifyKey, error) {
	var out VerifyKey
	if err := c.do(ctx, call{method: "GET", path: "/v1/keys/verify", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
