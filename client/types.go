package client

import "encoding/json"

// The wire types below match the server's JSON exactly (the OpenAPI
// document at GET /openapi.json). Optional request fields are omitted when
// empty; answers may gain members, which these types ignore. Times are RFC
// 3339 strings as the server writes them, and durations ISO 8601 ("PT2H").

// Subject is what an expectation or a fact is about.
type Subject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// SatisfiedBy names the fact key that satisfies an expectation.
type SatisfiedBy struct {
	FactKey string `json:"factKey"`
	// Lookback (ISO 8601 duration, at most the server's
	// -fact-lookback-max) lets a fact the server accepted within that
	// window before the raise satisfy the expectation when it is raised.
	Lookback string `json:"lookback,omitempty"`
}

// WatchTask names another registered agent's A2A task an expectation
// waits on: completed satisfies it, failed, rejected or canceled refutes
// it. The token must act for that agent.
type WatchTask struct {
	AgentID string `json:"agentId"`
	TaskID  string `json:"taskId"`
}

// RefutedBy names the fact key that lapses an open expectation at once
// with lapse "refuted" ("the payment was declined").
type RefutedBy struct {
	FactKey  string `json:"factKey"`
	Lookback string `json:"lookback,omitempty"`
}

// Anchor makes an expectation due Offset (ISO 8601 duration) after another
// expectation is satisfied.
type Anchor struct {
	ExpectationID string `json:"expectationId"`
	Offset        string `json:"offset"`
}

// Expectation is one expectation of the A2A Expectations extension.
type Expectation struct {
	ExpectationID string      `json:"expectationId"`
	Kind          string      `json:"kind"`
	Subject       Subject     `json:"subject"`
	Expects       string      `json:"expects"`
	SatisfiedBy   SatisfiedBy `json:"satisfiedBy"`
	RefutedBy     *RefutedBy  `json:"refutedBy,omitempty"`
	WatchTask     *WatchTask  `json:"watchTask,omitempty"`
	DueAt         string      `json:"dueAt"`
	Grace         string      `json:"grace,omitempty"`
	Anchor        *Anchor     `json:"anchor,omitempty"`
	After         []string    `json:"after,omitempty"`
	Horizon       string      `json:"horizon,omitempty"`
	Basis         string      `json:"basis"`
	Supersedes    string      `json:"supersedes,omitempty"`
}

// RaiseRequest raises expectations in an origin task's context.
type RaiseRequest struct {
	TaskID       string        `json:"taskId"`
	ContextID    string        `json:"contextId"`
	Skill        string        `json:"skill,omitempty"`
	Expectations []Expectation `json:"expectations"`
}

// Fact is an observed fact; its key satisfies the open expectations that
// name it. Source is set by the server on stored facts (the reporter).
type Fact struct {
	FactKey    string   `json:"factKey"`
	ObservedAt string   `json:"observedAt"`
	Source     string   `json:"source,omitempty"`
	Subject    *Subject `json:"subject,omitempty"`
}

// FactOutcome is what one reported fact did: the ids it satisfied.
type FactOutcome struct {
	FactKey   string   `json:"factKey"`
	Satisfied []string `json:"satisfied"`
	// Refuted lists the expectations the fact lapsed "refuted".
	Refuted []string `json:"refuted,omitempty"`
}

// Lapse describes why an expectation lapsed; it is what the agent's lapse
// task carries.
type Lapse struct {
	ExpectationID  string   `json:"expectationId"`
	Kind           string   `json:"kind"`
	Subject        Subject  `json:"subject"`
	Expects        string   `json:"expects"`
	Lapse          string   `json:"lapse"` // overdue, skipped, stalled or refuted
	ProjectedDueAt string   `json:"projectedDueAt"`
	DueAt          string   `json:"dueAt"`
	LapsedAt       string   `json:"lapsedAt"`
	LastFactAt     string   `json:"lastFactAt,omitempty"`
	SatisfiedAfter []string `json:"satisfiedAfter,omitempty"`
	// RefutedBy is the fact that refuted the expectation (lapse "refuted").
	RefutedBy *Fact `json:"refutedBy,omitempty"`
	Lineage   int   `json:"lineage"`
}

// Delivery is the outbox state of a lapse task.
type Delivery struct {
	MessageID     string `json:"messageId"`
	Attempts      int    `json:"attempts,omitempty"`
	LastError     string `json:"lastError,omitempty"`
	DeadLettered  bool   `json:"deadLettered,omitempty"`
	Suppressed    bool   `json:"suppressed,omitempty"`
	DeliveredAt   string `json:"deliveredAt,omitempty"`
	NextAttemptAt string `json:"nextAttemptAt,omitempty"`
	// Activated is whether the agent echoed the extension URI; nil until
	// delivered.
	Activated *bool `json:"activated,omitempty"`
	// Replays counts the times an operator put the lapse back for
	// delivery after it was dead-lettered or suppressed.
	Replays int `json:"replays,omitempty"`
}

// Record is the watcher's record of one expectation (the extension's
// ExpectationRecord plus the watcher's fields).
type Record struct {
	AgentID        string      `json:"agentId"`
	TaskID         string      `json:"taskId"`
	ContextID      string      `json:"contextId"`
	Skill          string      `json:"skill,omitempty"`
	Expectation    Expectation `json:"expectation"`
	ProjectedDueAt string      `json:"projectedDueAt"`
	DueAt          string      `json:"dueAt"`
	State          string      `json:"state"` // open, satisfied, lapsed or withdrawn
	PastDue        bool        `json:"pastDue,omitempty"`
	SatisfiedAt    string      `json:"satisfiedAt,omitempty"`
	ObservedAt     string      `json:"observedAt,omitempty"`
	Late           bool        `json:"late,omitempty"`
	SatisfiedBy    *Fact       `json:"satisfiedBy,omitempty"`
	Lapse          *Lapse      `json:"lapse,omitempty"`
	LapseTaskID    string      `json:"lapseTaskId,omitempty"`
	// Ack is who acknowledged the lapse, when and why (Acknowledge).
	Ack             *Ack      `json:"ack,omitempty"`
	WithdrawnReason string    `json:"withdrawnReason,omitempty"`
	WithdrawnAt     string    `json:"withdrawnAt,omitempty"`
	HorizonChecked  bool      `json:"horizonChecked,omitempty"`
	RaisedAt        string    `json:"raisedAt"`
	Lineage         int       `json:"lineage"`
	Delivery        *Delivery `json:"delivery,omitempty"`
	// ExpiresAt is when the record, final, will be deleted (the server's
	// -retain-expectations after it became final); empty while open.
	ExpiresAt string `json:"expiresAt,omitempty"`
}

// Ack is a person's acknowledgement of a lapse.
type Ack struct {
	By   string `json:"by"`
	At   string `json:"at"`
	Note string `json:"note,omitempty"`
}

// Record states.
const (
	StateOpen      = "open"
	StateSatisfied = "satisfied"
	StateLapsed    = "lapsed"
	StateWithdrawn = "withdrawn"
)

// ListOptions filter and page ListExpectations; empty fields are not sent.
type ListOptions struct {
	State       string
	SubjectType string
	SubjectID   string
	Limit       int // 0: the server's default; at most 500
	NextToken   string
}

// RecordsPage is one page of records; NextToken is set while more follow.
type RecordsPage struct {
	Records   []Record `json:"records"`
	NextToken string   `json:"nextToken,omitempty"`
}

// A2AResult is what a pushed A2A payload did.
type A2AResult struct {
	TaskID    string        `json:"taskId,omitempty"`
	Raised    []Record      `json:"raised"`
	Facts     []FactOutcome `json:"facts"`
	Withdrawn []Record      `json:"withdrawn"`
	Canceled  []Record      `json:"canceled"`
}

// Credential holds an agent's secret for one security scheme of its card;
// set exactly the fields of the scheme's type: Token (HTTP bearer),
// Username and Password (HTTP basic), Key (API key), ClientID,
// ClientSecret and Scopes (OAuth 2.0 client credentials, OpenID Connect),
// Certificate and PrivateKey in PEM (mutual TLS).
type Credential struct {
	Token        string   `json:"token,omitempty"`
	Username     string   `json:"username,omitempty"`
	Password     string   `json:"password,omitempty"`
	Key          string   `json:"key,omitempty"`
	ClientID     string   `json:"clientId,omitempty"`
	ClientSecret string   `json:"clientSecret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	Certificate  string   `json:"certificate,omitempty"`
	PrivateKey   string   `json:"privateKey,omitempty"`
}

// Criterion is one criterion of an ANTICIPATE.
type Criterion struct {
	CriterionID string  `json:"criterion_id"`
	Description string  `json:"description"`
	Measurement string  `json:"measurement"` // DETERMINISTIC, HEURISTIC or HUMAN
	Assertion   string  `json:"assertion"`
	Weight      float64 `json:"weight"`
	// Queue names the review queue that grades a HUMAN criterion, or
	// that receives a HEURISTIC one's calibration sample.
	Queue string `json:"queue,omitempty"`
	// Calibrate (HEURISTIC with Queue) sends that share of the judge's
	// grades to people as well.
	Calibrate *Calibrate `json:"calibrate,omitempty"`
}

// Calibrate is a HEURISTIC criterion's calibration sample.
type Calibrate struct {
	Sample float64 `json:"sample"` // in (0, 1]
}

// AnticipationExpectations are an ANTICIPATE's criteria by category.
type AnticipationExpectations struct {
	OutcomeCriteria    []Criterion `json:"outcome_criteria"`
	TrajectoryCriteria []Criterion `json:"trajectory_criteria"`
	AntiCriteria       []Criterion `json:"anti_criteria"`
}

// GradingPolicy says how an ANTICIPATE's criteria are scored.
type GradingPolicy struct {
	GraderType            string  `json:"grader_type"` // CODE, MODEL, HUMAN or COMPOSITE
	PassingThreshold      float64 `json:"passing_threshold"`
	WeightedScoring       bool    `json:"weighted_scoring"`
	FailOnAnyAntiCriteria bool    `json:"fail_on_any_anti_criteria"`
}

// Anticipate is an AIGP RFC-032 ANTICIPATE message. DDNASignature must be
// its digest: Sign computes it. A message with top-level fields this type
// lacks (the server keeps them) can be sent as a map or json.RawMessage.
type Anticipate struct {
	ProtocolVersion string                   `json:"protocol_version"`
	MessageType     string                   `json:"message_type"` // ANTICIPATE
	Emitter         string                   `json:"emitter,omitempty"`
	AppID           string                   `json:"app_id"`
	AgentID         string                   `json:"agent_id"`
	AnticipationID  string                   `json:"anticipation_id"`
	PlanID          string                   `json:"plan_id,omitempty"`
	ScopeEnvelopeID string                   `json:"scope_envelope_id"`
	SessionID       string                   `json:"session_id"`
	Timestamp       string                   `json:"timestamp"`
	Expectations    AnticipationExpectations `json:"expectations"`
	GradingPolicy   GradingPolicy            `json:"grading_policy"`
	DDNASignature   string                   `json:"d_dna_signature,omitempty"`
}

// Declared answers an ANTICIPATE declaration or replacement. Created is
// true when the declaration was new (201), false for an identical retry or
// a replacement (200).
type Declared struct {
	AnticipationID string `json:"anticipation_id"`
	Sealed         bool   `json:"sealed"`
	Digest         string `json:"digest"`
	Created        bool   `json:"-"`
}

// Anticipation is a stored ANTICIPATE: the message as sent and its state.
type Anticipation struct {
	Anticipation json.RawMessage `json:"anticipation"`
	Sealed       bool            `json:"sealed"`
	SealedAt     string          `json:"sealed_at,omitempty"`
	Digest       string          `json:"digest"`
	Emitter      string          `json:"emitter"`
	DeclaredBy   string          `json:"declared_by"`
	// ExpiresAt is when the ANTICIPATE will be deleted, with the evidence
	// of the last plan it binds (empty while none completed, or one runs).
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Observation is an observed call result an OUTCOME event reports, read by
// assertions that call Call with Args.
type Observation struct {
	Call  string `json:"call"`
	Args  []any  `json:"args,omitempty"`
	Value any    `json:"value"`
}

// Event is an AIGP RFC-032 execution event; MessageType is TOOL_REQUEST,
// TOOL_RESULT, STEP_COMPLETE, ESCALATION, OUTCOME or PLAN_COMPLETE, and
// only the fields of that type may be set. An event with fields this type
// lacks (the server keeps and chains them) can be sent as a map or
// json.RawMessage.
type Event struct {
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	MessageType     string          `json:"message_type"`
	EventID         string          `json:"event_id"`
	PlanID          string          `json:"plan_id,omitempty"`
	AgentID         string          `json:"agent_id,omitempty"`
	SessionID       string          `json:"session_id,omitempty"`
	ScopeEnvelopeID string          `json:"scope_envelope_id,omitempty"`
	Timestamp       string          `json:"timestamp"`
	Tool            string          `json:"tool,omitempty"`
	Arguments       json.RawMessage `json:"arguments,omitempty"`
	Status          string          `json:"status,omitempty"`
	Variables       map[string]any  `json:"variables,omitempty"`
	Observations    []Observation   `json:"observations,omitempty"`
}

// Appended answers an appended event: its place in the plan's chain.
type Appended struct {
	EventID string `json:"event_id"`
	Digest  string `json:"digest"`
	Seq     int    `json:"seq"`
}

// Aggregate is a plan's events folded as they are stored: what VERIFY's
// assertions read.
type Aggregate struct {
	StepCount       int            `json:"step_count"`
	EscalationCount int            `json:"escalation_count"`
	ErrorCount      int            `json:"error_count"`
	ToolCounts      map[string]int `json:"tool_counts,omitempty"`
	First           string         `json:"first,omitempty"`
	Last            string         `json:"last,omitempty"`
	Variables       map[string]any `json:"variables,omitempty"`
	Observations    []Observation  `json:"observations,omitempty"`
}

// Execution is the state of a plan's execution.
type Execution struct {
	PlanID          string   `json:"plan_id"`
	ScopeEnvelopeID string   `json:"scope_envelope_id,omitempty"`
	Begun           bool     `json:"begun"`
	BegunAt         string   `json:"begun_at,omitempty"`
	Bound           []string `json:"bound,omitempty"`
	Agents          []string `json:"agents,omitempty"`
	Head            string   `json:"head"`
	Count           int      `json:"count"`
	Completed       bool     `json:"completed"`
	CompletedAt     string   `json:"completed_at,omitempty"`
	// ExpiresAt is when the plan's evidence will be deleted (the server's
	// -retain-evidence after PLAN_COMPLETE); empty while it runs.
	ExpiresAt string    `json:"expires_at,omitempty"`
	Aggregate Aggregate `json:"aggregate"`
}

// StoredEvent is one link of a plan's digest chain; Event is the event as
// received.
type StoredEvent struct {
	Seq         int             `json:"seq"`
	EventID     string          `json:"event_id"`
	MessageType string          `json:"message_type"`
	Event       json.RawMessage `json:"event"`
	Prev        string          `json:"prev"`
	Digest      string          `json:"digest"`
}

// EventsOptions page ListEvents; empty fields are not sent.
type EventsOptions struct {
	Limit     int // 0: the server's default (100)
	NextToken string
}

// EventsPage is one page of a plan's chain, with the execution as read
// with it; NextToken is set while more events follow.
type EventsPage struct {
	Execution Execution     `json:"execution"`
	Events    []StoredEvent `json:"events"`
	NextToken string        `json:"nextToken,omitempty"`
}

// Result is the grade of one criterion in a VERIFY. Score is nil while
// PENDING.
type Result struct {
	CriterionID  string   `json:"criterion_id"`
	Category     string   `json:"category"`
	Measurement  string   `json:"measurement"`
	Weight       float64  `json:"weight"`
	Status       string   `json:"status"` // PASS, FAIL, PENDING or ERROR
	Score        *float64 `json:"score"`
	Evidence     string   `json:"evidence"`
	GradedBy     string   `json:"graded_by"`
	Rationale    string   `json:"rationale,omitempty"`
	PromptDigest string   `json:"prompt_digest,omitempty"`
}

// Verification is an AIGP RFC-032 VERIFY message as the server signed it.
type Verification struct {
	ProtocolVersion    string   `json:"protocol_version"`
	MessageType        string   `json:"message_type"`
	VerificationID     string   `json:"verification_id"`
	AnticipationID     string   `json:"anticipation_id"`
	PlanID             string   `json:"plan_id"`
	SessionID          string   `json:"session_id"`
	AgentID            string   `json:"agent_id"`
	AppID              string   `json:"app_id"`
	Timestamp          string   `json:"timestamp"`
	Results            []Result `json:"results"`
	Score              float64  `json:"score"`
	PassingThreshold   float64  `json:"passing_threshold"`
	AntiCriteriaFailed []string `json:"anti_criteria_failed"`
	Verdict            string   `json:"verdict"`             // PASS, FAIL or PENDING
	AnticipationDigest string   `json:"anticipation_digest"` // "" when Sampled
	ExecutionDigest    string   `json:"execution_digest"`
	// Sampled marks an online evaluator's VERIFY of a plan that declared
	// no ANTICIPATE; Evaluator names it.
	Sampled   bool   `json:"sampled,omitempty"`
	Evaluator string `json:"evaluator,omitempty"`
	// CriteriaDigest (with Sampled) is the digest of the evaluator's
	// criteria the VERIFY was graded against.
	CriteriaDigest  string `json:"criteria_digest,omitempty"`
	DDNASignature   string `json:"d_dna_signature"`
	ServerSignature string `json:"server_signature,omitempty"`
}

// Grade is a human grade of a HUMAN criterion, Score in [0, 1].
type Grade struct {
	CriterionID string  `json:"criterion_id"`
	Score       float64 `json:"score"`
	Rationale   string  `json:"rationale,omitempty"`
}

// VerifyKey is the public half of the server's VERIFY signing key.
type VerifyKey struct {
	Alg       string `json:"alg"`        // Ed25519
	PublicKey string `json:"public_key"` // unpadded base64url
}
