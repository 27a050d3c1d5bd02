package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
)

// ListedAgent is one agent of GET /v1/agents: its id and its card as
// stored.
type ListedAgent struct {
	AgentID string          `json:"agentId"`
	Card    json.RawMessage `json:"card"`
}

// AgentsPage is one page of GET /v1/agents.
type AgentsPage struct {
	Agents    []ListedAgent `json:"agents"`
	NextToken string        `json:"nextToken,omitempty"`
}

// AnticipationsPage is one page of GET /v1/agents/{agentId}/anticipations,
// newest first.
type AnticipationsPage struct {
	Anticipations []Anticipation `json:"anticipations"`
	NextToken     string         `json:"nextToken,omitempty"`
}

func pageQuery(limit int, nextToken string) string {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if nextToken != "" {
		q.Set("nextToken", nextToken)
	}
	return q.Encode()
}

// ListAgents returns one page of the agents whose cards the token may act
// for, in agent id order (GET /v1/agents; limit 0 is the server's default
// of 100, nextToken "" the first page). Errors (*Error): 400 for a bad
// limit or token, 401, 403.
func (c *Client) ListAgents(ctx context.Context, limit int, nextToken string) (*AgentsPage, error) {
	var out AgentsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents", query: pageQuery(limit, nextToken), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAnticipations returns one page of the ANTICIPATEs declared for
// agentID, newest first (GET /v1/agents/{agentId}/anticipations; limit 0 is
// the server's default of 20). Errors (*Error): 400 for a bad limit or
// token, 401, 403 when the token may not act for the agent.
func (c *Client) ListAnticipations(ctx context.Context, agentID string, limit int, nextToken string) (*AnticipationsPage, error) {
	var out AnticipationsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/anticipations", query: pageQuery(limit, nextToken), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
