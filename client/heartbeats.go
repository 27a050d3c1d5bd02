package client

import (
	"context"
)

// HeartbeatSpec declares a recurring check (PUT
// /v1/agents/{agentId}/heartbeats/{name}): Kind (on the agent's card) and
// either Every (ISO 8601, at least PT1S) or Cron (five fields) with an
// IANA Timezone; optional Grace, Subject (default: the kind's subject
// type, the heartbeat's name), Expects and Until (RFC 3339).
type HeartbeatSpec struct {
	Kind     string   `json:"kind"`
	Every    string   `json:"every,omitempty"`
	Cron     string   `json:"cron,omitempty"`
	Timezone string   `json:"timezone,omitempty"`
	Grace    string   `json:"grace,omitempty"`
	Subject  *Subject `json:"subject,omitempty"`
	Expects  string   `json:"expects,omitempty"`
	Until    string   `json:"until,omitempty"`
}

// Heartbeat is a heartbeat with its status: new, up, started, late, down
// or paused. ExpectationID is its current period, an ordinary expectation
// (hb:<name>:<n>).
type Heartbeat struct {
	Name          string  `json:"name"`
	Kind          string  `json:"kind"`
	Every         string  `json:"every,omitempty"`
	Cron          string  `json:"cron,omitempty"`
	Timezone      string  `json:"timezone,omitempty"`
	Grace         string  `json:"grace,omitempty"`
	Subject       Subject `json:"subject"`
	Expects       string  `json:"expects,omitempty"`
	Until         string  `json:"until,omitempty"`
	Status        string  `json:"status"`
	LastPingAt    string  `json:"lastPingAt,omitempty"`
	StartedAt     string  `json:"startedAt,omitempty"`
	NextDueAt     string  `json:"nextDueAt,omitempty"`
	ExpectationID string  `json:"expectationId,omitempty"`
	Period        int     `json:"period"`
	CreatedAt     string  `json:"createdAt"`
	UpdatedAt     string  `json:"updatedAt"`
}

// HeartbeatsPage is one page of an agent's heartbeats.
type HeartbeatsPage struct {
	Heartbeats []Heartbeat `json:"heartbeats"`
	NextToken  string      `json:"nextToken,omitempty"`
}

func heartbeatPath(agentID, name string) string {
	return "/v1/agents/" + seg(agentID) + "/heartbeats/" + seg(name)
}

// PutHeartbeat creates or replaces heartbeat name of agentID. A new one is
// "new" until its first ping. Errors (*Error): 400 naming the field (kind,
// every, cron, timezone, grace, until, name), 404 without a card, 401,
// 403.
func (c *Client) PutHeartbeat(ctx context.Context, agentID, name string, spec HeartbeatSpec) (*Heartbeat, error) {
	var out Heartbeat
	if err := c.do(ctx, call{method: "PUT", path: heartbeatPath(agentID, name), body: &spec, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Heartbeat reads one heartbeat. Errors (*Error): 404, 400, 401, 403.
func (c *Client) Heartbeat(ctx context.Context, agentID, name string) (*Heartbeat, error) {
	var out Heartbeat
	if err := c.do(ctx, call{method: "GET", path: heartbeatPath(agentID, name), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListHeartbeats returns one page of agentID's heartbeats (limit 0: the
// server's default). Errors (*Error): 400 naming limit or nextToken, 401,
// 403.
func (c *Client) ListHeartbeats(ctx context.Context, agentID string, limit int, nextToken string) (*HeartbeatsPage, error) {
	var out HeartbeatsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/heartbeats", query: pageQuery(limit, nextToken), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// PingSignal is what a ping says: PingSuccess (a run finished well),
// PingStart (a run started) or PingFail (a run failed).
type PingSignal string

// The signals of Ping.
const (
	PingSuccess PingSignal = ""
	PingStart   PingSignal = "start"
	PingFail    PingSignal = "fail"
)

// Ping sends a heartbeat's signal: success satisfies the current period
// and raises the next; start marks a run started (it must ping within
// grace); fail lapses the current period at once as "refuted". Errors
// (*Error): 404, 400, 401, 403.
func (c *Client) Ping(ctx context.Context, agentID, name string, signal PingSignal) (*Heartbeat, error) {
	path := heartbeatPath(agentID, name) + "/ping"
	if signal != PingSuccess {
		path += "/" + string(signal)
	}
	var out Heartbeat
	// A ping is not idempotent (a success raises the next period): it is
	// retried only when the server surely did not get it.
	if err := c.do(ctx, call{method: "POST", path: path, once: true, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// PauseHeartbeat pauses a heartbeat (its open period is withdrawn).
// Errors (*Error): 404, 400, 401, 403.
func (c *Client) PauseHeartbeat(ctx context.Context, agentID, name string) (*Heartbeat, error) {
	var out Heartbeat
	if err := c.do(ctx, call{method: "POST", path: heartbeatPath(agentID, name) + "/pause", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResumeHeartbeat makes a paused heartbeat expect pings again. Errors
// (*Error): 404, 400, 401, 403.
func (c *Client) ResumeHeartbeat(ctx context.Context, agentID, name string) (*Heartbeat, error) {
	var out Heartbeat
	if err := c.do(ctx, call{method: "POST", path: heartbeatPath(agentID, name) + "/resume", out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteHeartbeat deletes a heartbeat; its open period is withdrawn.
// Errors (*Error): 404, 400, 401, 403.
func (c *Client) DeleteHeartbeat(ctx context.Context, agentID, name string) error {
	return c.do(ctx, call{method: "DELETE", path: heartbeatPath(agentID, name)})
}
