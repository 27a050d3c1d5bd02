package client

import (
	"context"
	"encoding/json"
)

// EvaluationRequest is the body of POST /v1/evaluations: re-grade stored
// executions against criteria given now.
type EvaluationRequest struct {
	Filter EvaluationFilter `json:"filter"`
	// Criteria are criteria as an ANTICIPATE declares them (Criterion, or
	// any JSON object), each with an optional "category" (outcome,
	// trajectory, anti; default outcome).
	Criteria []json.RawMessage `json:"criteria"`
	// GradingPolicy is an RFC-032 grading_policy; nil grades each plan
	// with its own ANTICIPATE's.
	GradingPolicy *GradingPolicy `json:"gradingPolicy,omitempty"`
	// Judge names another model of the server's judge.
	Judge *EvaluationJudge `json:"judge,omitempty"`
}

// EvaluationFilter selects the stored executions: the completed plans of
// AgentID whose PLAN_COMPLETE is in [From, To) (RFC 3339, each optional),
// or the plans named.
type EvaluationFilter struct {
	AgentID string   `json:"agentId,omitempty"`
	From    string   `json:"from,omitempty"`
	To      string   `json:"to,omitempty"`
	PlanIDs []string `json:"planIds,omitempty"`
}

// EvaluationJudge overrides the judge's model.
type EvaluationJudge struct {
	Model string `json:"model"`
}

// Evaluation is a re-grading job: its state, progress, summary and one
// page of its results.
type Evaluation struct {
	EvaluationID string             `json:"evaluationId"`
	State        string             `json:"state"` // running, done or failed
	Progress     EvaluationProgress `json:"progress"`
	Filter       EvaluationFilter   `json:"filter"`
	Results      []EvaluationResult `json:"results"`
	NextToken    string             `json:"nextToken,omitempty"`
	Summary      EvaluationSummary  `json:"summary"`
	JudgeCalls   int                `json:"judgeCalls"`
	CreatedAt    string             `json:"createdAt"`
	FinishedAt   string             `json:"finishedAt,omitempty"`
	Error        string             `json:"error,omitempty"`
	StartedBy    string             `json:"startedBy"`
}

// EvaluationProgress counts the plans graded of the total.
type EvaluationProgress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// EvaluationResult is one plan's re-grade beside its original VERIFY.
type EvaluationResult struct {
	PlanID                 string        `json:"planId"`
	AgentID                string        `json:"agentId"`
	Verdict                string        `json:"verdict,omitempty"`
	Score                  *float64      `json:"score"`
	OriginalVerdict        string        `json:"originalVerdict,omitempty"`
	OriginalScore          *float64      `json:"originalScore"`
	OriginalVerificationID string        `json:"originalVerificationId,omitempty"`
	Criteria               []Result      `json:"criteria"`
	Verification           *Verification `json:"verification,omitempty"`
	Error                  string        `json:"error,omitempty"`
}

// EvaluationSummary sums up the results so far.
type EvaluationSummary struct {
	PassRate     *float64                            `json:"passRate"`
	MeanScore    *float64                            `json:"meanScore"`
	Graded       int                                 `json:"graded"`
	Passed       int                                 `json:"passed"`
	Pending      int                                 `json:"pending"`
	Errors       int                                 `json:"errors"`
	Changed      []string                            `json:"changed"`
	ChangedCount int                                 `json:"changedCount"`
	PerCriterion map[string]EvaluationCriterionScore `json:"perCriterion"`
}

// EvaluationCriterionScore is one criterion's part of the summary.
type EvaluationCriterionScore struct {
	PassRate  *float64 `json:"passRate"`
	MeanScore *float64 `json:"meanScore"`
	Passed    int      `json:"passed"`
	Failed    int      `json:"failed"`
	Errors    int      `json:"errors"`
	Pending   int      `json:"pending"`
}

// StartEvaluation starts re-grading the stored executions req names; the
// answer is the job, running (or done when nothing matched). Poll it with
// Evaluation. It is sent once (a retry would start a second job). Errors
// (*Error): 400 naming the field (criteria[i].assertion, filter.planIds[i],
// …), 401, 403 (the token may not act for filter.agentId).
func (c *Client) StartEvaluation(ctx context.Context, req EvaluationRequest) (*Evaluation, error) {
	var out Evaluation
	if err := c.do(ctx, call{method: "POST", path: "/v1/evaluations", body: &req, once: true, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Evaluation reads a job with one page of its results (limit 0: the
// server's default of 100). Errors (*Error): 404 (also for a job of agents
// the token may not act for), 400 naming limit or nextToken, 401, 403.
func (c *Client) Evaluation(ctx context.Context, id string, limit int, nextToken string) (*Evaluation, error) {
	var out Evaluation
	if err := c.do(ctx, call{method: "GET", path: "/v1/evaluations/" + seg(id), query: pageQuery(limit, nextToken), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// EvaluationsPage is one page of an agent's evaluations, newest first.
type EvaluationsPage struct {
	Evaluations []Evaluation `json:"evaluations"`
	NextToken   string       `json:"nextToken,omitempty"`
}

// ListEvaluations returns one page of the evaluations of agentID's plans,
// newest first, without their results (limit 0: the server's default of
// 20). Errors (*Error): 400 naming limit or nextToken, 401, 403.
func (c *Client) ListEvaluations(ctx context.Context, agentID string, limit int, nextToken string) (*EvaluationsPage, error) {
	var out EvaluationsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/evaluations", query: pageQuery(limit, nextToken), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// EvaluatorRequest is the body of PUT
// /v1/agents/{agentId}/evaluators/{name}: criteria that grade a sample of
// the agent's completed plans that declared no ANTICIPATE.
type EvaluatorRequest struct {
	// Criteria are as in EvaluationRequest (not HUMAN).
	Criteria []json.RawMessage `json:"criteria"`
	// GradingPolicy is nil for the server's default (threshold 0.5).
	GradingPolicy *GradingPolicy `json:"gradingPolicy,omitempty"`
	// Sample is the share of matching plans graded, in (0, 1].
	Sample float64 `json:"sample"`
	// Filter narrows the plans graded.
	Filter EvaluatorFilter `json:"filter"`
}

// EvaluatorFilter narrows the plans an evaluator grades.
type EvaluatorFilter struct {
	PlanIDPrefix    string `json:"planIdPrefix,omitempty"`
	ScopeEnvelopeID string `json:"scopeEnvelopeId,omitempty"`
}

// Evaluator is an online evaluator as the server keeps it.
type Evaluator struct {
	AgentID       string            `json:"agentId"`
	Name          string            `json:"name"`
	Criteria      []json.RawMessage `json:"criteria"`
	GradingPolicy json.RawMessage   `json:"gradingPolicy,omitempty"`
	Sample        float64           `json:"sample"`
	Filter        EvaluatorFilter   `json:"filter"`
	CreatedAt     string            `json:"createdAt"`
	UpdatedAt     string            `json:"updatedAt"`
}

// PutEvaluator creates or replaces an online evaluator of agentID.
// Errors (*Error): 400 naming the field, 409 past 20 evaluators, 401, 403.
func (c *Client) PutEvaluator(ctx context.Context, agentID, name string, req EvaluatorRequest) (*Evaluator, error) {
	var out Evaluator
	if err := c.do(ctx, call{method: "PUT", path: "/v1/agents/" + seg(agentID) + "/evaluators/" + seg(name), body: &req, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Evaluator reads one evaluator. Errors (*Error): 404, 401, 403.
func (c *Client) Evaluator(ctx context.Context, agentID, name string) (*Evaluator, error) {
	var out Evaluator
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/evaluators/" + seg(name), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListEvaluators lists agentID's evaluators. Errors (*Error): 401, 403.
func (c *Client) ListEvaluators(ctx context.Context, agentID string) ([]Evaluator, error) {
	var out struct {
		Evaluators []Evaluator `json:"evaluators"`
	}
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/evaluators", out: &out}); err != nil {
		return nil, err
	}
	return out.Evaluators, nil
}

// DeleteEvaluator deletes an evaluator (its VERIFYs stay). Errors
// (*Error): 404, 401, 403.
func (c *Client) DeleteEvaluator(ctx context.Context, agentID, name string) error {
	return c.do(ctx, call{method: "DELETE", path: "/v1/agents/" + seg(agentID) + "/evaluators/" + seg(name)})
}

// EvaluatorVerificationsPage is a page of the VERIFYs an evaluator made.
type EvaluatorVerificationsPage struct {
	Verifications []Verification `json:"verifications"`
	NextToken     string         `json:"nextToken,omitempty"`
}

// EvaluatorVerifications returns one page of the VERIFYs evaluator name
// of agentID made (limit 0: the server's default of 100). Errors (*Error):
// 400 naming limit or nextToken, 401, 403.
func (c *Client) EvaluatorVerifications(ctx context.Context, agentID, name string, limit int, nextToken string) (*EvaluatorVerificationsPage, error) {
	var out EvaluatorVerificationsPage
	if err := c.do(ctx, call{method: "GET", path: "/v1/agents/" + seg(agentID) + "/evaluators/" + seg(name) + "/verifications", query: pageQuery(limit, nextToken), out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}
