package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/heartbeat"
	"github.com/agentclock/clockwork/internal/regrade"
)

// Tool is an operation of the API offered to LLM agents as an MCP tool
// (internal/mcpapi serves them at POST /mcp). A tool is its HTTP twin
// (Route) called another way: its arguments are the route's path
// parameters, query and body in one JSON object, decoded by the same strict
// decoder into the same Go types, authorised with the same scope and agent
// checks, and passed to the same operation, so both answer alike.
type Tool struct {
	Name        string
	Title       string
	Description string
	// Route is the pattern of the HTTP twin.
	Route string
	// Scope is the scope the twin requires.
	Scope auth.Scope
	// ReadOnly tools change nothing.
	ReadOnly bool
	// Input is the Go type the arguments decode into; Output the type of the
	// result. Their JSON schemas are inferred from them.
	Input, Output reflect.Type
	// Components names the OpenAPI component schema (openapi.json) of an
	// Input property that the service validates itself and keeps as sent
	// (a json.RawMessage, so nothing can be inferred from its Go type); the
	// key "" stands for the arguments object as a whole.
	Components map[string]string

	agentOf func(args any) string
	call    func(ctx context.Context, args any) (any, error)
	decode  func([]byte) (any, error)
}

// newTool completes t from its argument and result types, the arguments'
// agent (nil when the service checks it, as for anticipations and events)
// and the operation its route also calls.
func newTool[In, Out any](t Tool, agentOf func(*In) string, op func(context.Context, *In) (Out, error)) Tool {
	t.Input, t.Output = reflect.TypeFor[In](), reflect.TypeFor[Out]()
	t.decode = func(b []byte) (any, error) {
		in := new(In)
		return in, decodeStrict(b, in)
	}
	if agentOf != nil {
		t.agentOf = func(a any) string { return agentOf(a.(*In)) }
	}
	t.call = func(ctx context.Context, a any) (any, error) { return op(ctx, a.(*In)) }
	return t
}

// Tools returns the API's MCP tools: the watcher's, and the evaluation
// loop's when the handler has it.
func (h *Handler) Tools() []Tool {
	agent := func(id string) string { return id }
	tools := []Tool{
		newTool(Tool{
			Name: "raise_expectations", Title: "Raise expectations", Route: "POST /v1/agents/{agentId}/expectations", Scope: auth.ExpectationsWrite,
			Description: "Raise expectations for an origin task (taskId, contextId), all or nothing: each says what is expected of a subject and by when " +
				"(dueAt, RFC 3339; grace and anchor offsets as ISO 8601 durations such as PT2H). When one lapses (overdue, skipped or stalled) the watcher " +
				"sends the agent a new A2A task in the origin task's context. Ids are never reused: the same id and body again is an idempotent retry, " +
				"another body a conflict. The kind must be declared on the agent's card. Scope: expectations:write.",
		}, func(in *raiseArgs) string { return agent(in.AgentID) }, h.raiseOp),
		newTool(Tool{
			Name: "report_facts", Title: "Report facts", Route: "POST /v1/agents/{agentId}/facts", Scope: auth.FactsWrite,
			Description: "Report facts the agent observed (factKey, observedAt in RFC 3339, optional subject). A fact satisfies every open expectation of the agent " +
				"whose satisfiedBy.factKey equals its factKey exactly; the answer lists them per fact. The source is set to the caller. Scope: facts:write.",
		}, func(in *factsArgs) string { return in.AgentID }, h.factsOp),
		newTool(Tool{
			Name: "withdraw_expectations", Title: "Withdraw expectations", Route: "POST /v1/agents/{agentId}/withdrawals", Scope: auth.ExpectationsWrite,
			Description: "Withdraw open expectations by id, with an optional reason; withdrawn ones never lapse. Withdrawing a withdrawn one changes nothing; " +
				"a satisfied or lapsed one is a conflict. Scope: expectations:write.",
		}, func(in *withdrawArgs) string { return in.AgentID }, h.withdrawOp),
		newTool(Tool{
			Name: "get_expectation", Title: "Get an expectation", Route: "GET /v1/agents/{agentId}/expectations/{expectationId}", Scope: auth.Read, ReadOnly: true,
			Description: "Read one expectation's record: its state (open, satisfied, lapsed, withdrawn), current dueAt, the fact that satisfied it, " +
				"the lapse and the delivery of its lapse task. Scope: read.",
		}, func(in *getArgs) string { return in.AgentID }, h.getOp),
		newTool(Tool{
			Name: "list_expectations", Title: "List expectations", Route: "GET /v1/agents/{agentId}/expectations", Scope: auth.Read, ReadOnly: true,
			Description: "List the agent's expectation records, optionally by state and by subject (subjectType with subjectId), a page at a time " +
				"(limit up to 500; pass nextToken back for the next page). Scope: read.",
		}, func(in *listArgs) string { return in.AgentID }, h.listOp),
		newTool(Tool{
			Name: "put_heartbeat", Title: "Create or replace a heartbeat", Route: "PUT /v1/agents/{agentId}/heartbeats/{name}", Scope: auth.ExpectationsWrite,
			Description: "Declare a recurring check: a kind on the agent's card and either every (an ISO 8601 duration, at least PT1S) or cron (five fields) " +
				"with an IANA timezone; optional grace, subject, expects and until. Each period is an ordinary expectation hb:<name>:<n> that lapses " +
				"overdue when no ping arrives by its due time plus grace. A new heartbeat waits for its first ping. Scope: expectations:write.",
		}, func(in *putHeartbeatArgs) string { return in.AgentID }, h.putHeartbeatOp),
		newTool(Tool{
			Name: "ping_heartbeat", Title: "Ping a heartbeat", Route: "POST /v1/agents/{agentId}/heartbeats/{name}/ping", Scope: auth.FactsWrite,
			Description: "Ping a heartbeat after a successful run: satisfies the current period (a lapsed one records the ping late, a recovery) and raises " +
				"the next. Answers the heartbeat's status. Scope: facts:write.",
		}, func(in *heartbeatArgs) string { return in.AgentID }, h.pingOp(heartbeat.Success)),
		newTool(Tool{
			Name: "fail_heartbeat", Title: "Report a failed run", Route: "POST /v1/agents/{agentId}/heartbeats/{name}/ping/fail", Scope: auth.FactsWrite,
			Description: "Report that a heartbeat's run failed: its current period lapses at once with lapse refuted, so its lapse task and alerts follow. " +
				"Scope: facts:write.",
		}, func(in *heartbeatArgs) string { return in.AgentID }, h.pingOp(heartbeat.Fail)),
		newTool(Tool{
			Name: "get_heartbeat", Title: "Get a heartbeat", Route: "GET /v1/agents/{agentId}/heartbeats/{name}", Scope: auth.Read, ReadOnly: true,
			Description: "Read a heartbeat: its schedule, status (new, up, started, late, down, paused), lastPingAt, nextDueAt and current period. Scope: read.",
		}, func(in *heartbeatArgs) string { return in.AgentID }, h.getHeartbeatOp),
		newTool(Tool{
			Name: "list_heartbeats", Title: "List heartbeats", Route: "GET /v1/agents/{agentId}/heartbeats", Scope: auth.Read, ReadOnly: true,
			Description: "List the agent's heartbeats with their status, a page at a time (limit up to 500; pass nextToken back). Scope: read.",
		}, func(in *listHeartbeatsArgs) string { return in.AgentID }, h.listHeartbeatsOp),
	}
	if h.Eval == nil {
		return tools
	}
	return append(tools,
		newTool(Tool{
			Name: "declare_anticipation", Title: "Declare an ANTICIPATE", Route: "POST /v1/anticipations", Scope: auth.AnticipationsWrite,
			Components: map[string]string{"": "Anticipate"},
			Description: "Declare an AIGP RFC-032 ANTICIPATE before a plan runs: weighted outcome, trajectory and anti criteria and a grading policy, " +
				"with d_dna_signature = sha256: + hex SHA-256 of the RFC 8785 form of the message without it. The plan's first TOOL_REQUEST or " +
				"STEP_COMPLETE seals it; PLAN_COMPLETE grades the execution against it (VERIFY). The arguments are the message itself. Scope: anticipations:write.",
		}, nil, func(ctx context.Context, in *json.RawMessage) (evaluation.Declared, error) {
			out, _, err := h.declareOp(ctx, *in)
			return out, err
		}),
		newTool(Tool{
			Name: "append_execution_event", Title: "Submit an execution event", Route: "POST /v1/executions/{planId}/events", Scope: auth.EventsWrite,
			Components: map[string]string{"event": "ExecutionEvent"},
			Description: "Submit one execution event of a plan, an RFC-032 message (message_type TOOL_REQUEST, TOOL_RESULT, STEP_COMPLETE, ESCALATION, " +
				"OUTCOME or PLAN_COMPLETE, with event_id and timestamp), kept as sent and chained by digest. A repeated event_id with the same body is " +
				"idempotent. PLAN_COMPLETE closes the plan and runs VERIFY. Scope: events:write.",
		}, nil, func(ctx context.Context, in *eventArgs) (evaluation.Appended, error) {
			if len(bytes.TrimSpace(in.Event)) == 0 || bytes.Equal(bytes.TrimSpace(in.Event), []byte("null")) {
				return evaluation.Appended{}, errs.Fields("invalid arguments", []errs.FieldError{{Path: "event", Message: "is required"}})
			}
			out, err := h.appendEventOp(ctx, in)
			return out, prefixFields(err, "event.")
		}),
		newTool(Tool{
			Name: "start_evaluation", Title: "Re-grade stored executions", Route: "POST /v1/evaluations", Scope: auth.GradesWrite,
			Components: map[string]string{"": "EvaluationRequest"},
			Description: "Start re-grading stored, completed plans against criteria given now (criteria as an ANTICIPATE declares them, each with an " +
				"optional category outcome, trajectory or anti; an optional gradingPolicy, else each plan's own): filter.agentId with an optional " +
				"from/to window on PLAN_COMPLETE, or filter.planIds. The plans' VERIFYs are not changed. Answers the job (state running); read it " +
				"with get_evaluation. Scope: grades:write.",
		}, nil, func(ctx context.Context, in *regrade.Request) (*evaluation.EvaluationView, error) {
			return h.startEvaluationOp(ctx, *in)
		}),
		newTool(Tool{
			Name: "get_evaluation", Title: "Get an evaluation", Route: "GET /v1/evaluations/{evaluationId}", Scope: auth.Read, ReadOnly: true,
			Description: "Read a re-grading job: state (running, done, failed), progress, summary (passRate, meanScore, the plans whose verdict " +
				"changed, per criterion) and a page of results beside each plan's original verdict (limit up to 100; pass nextToken back). Scope: read.",
		}, nil, func(ctx context.Context, in *getEvaluationArgs) (*evaluation.EvaluationView, error) {
			return h.Eval.Evaluation(ctx, in.EvaluationID, in.Limit, in.NextToken, actsForCtx(ctx))
		}),
		newTool(Tool{
			Name: "put_evaluator", Title: "Create or replace an online evaluator", Route: "PUT /v1/agents/{agentId}/evaluators/{name}", Scope: auth.GradesWrite,
			Components: map[string]string{"criteria": "CriteriaList", "gradingPolicy": "GradingPolicy"},
			Description: "Grade a sample of the agent's completed plans that declared no ANTICIPATE: criteria as an evaluation takes them (not HUMAN), " +
				"sample (the share graded, e.g. 0.1), an optional filter (planIdPrefix, scopeEnvelopeId) and gradingPolicy. Each VERIFY it makes is " +
				"marked sampled, names the evaluator and has no anticipation_digest. Scope: grades:write.",
		}, func(in *putEvaluatorArgs) string { return in.AgentID }, func(ctx context.Context, in *putEvaluatorArgs) (*evaluatorResult, error) {
			body, err := json.Marshal(map[string]any{"criteria": in.Criteria, "gradingPolicy": in.GradingPolicy, "sample": in.Sample, "filter": in.Filter})
			if err != nil {
				return nil, err
			}
			v, _, err := h.Eval.PutEvaluator(ctx, in.AgentID, in.Name, body)
			if err != nil {
				return nil, err
			}
			var out evaluatorResult
			b, _ := json.Marshal(v)
			return &out, json.Unmarshal(b, &out)
		}),
		newTool(Tool{
			Name: "list_review_items", Title: "List review items", Route: "GET /v1/review-queues/{queueId}/items", Scope: auth.Read, ReadOnly: true,
			Description: "List a review queue's items, oldest first: assignee \"me\" keeps those assigned to this token's principal (a reviewer's " +
				"inbox); state open (default) or done. Each item names the plan, its VERIFY, the criteria to grade (description and assertion) " +
				"and who still owes a review. Scope: read.",
		}, nil, func(ctx context.Context, in *listReviewItemsArgs) (*evaluation.ReviewItemsPage, error) {
			page, err := h.reviewItemsOp(ctx, in.QueueID, in.Assignee, in.State, in.Limit, in.NextToken)
			return &page, err
		}),
		newTool(Tool{
			Name: "submit_review", Title: "Review a criterion", Route: "POST /v1/review-queues/{queueId}/items/{itemId}/reviews", Scope: auth.GradesWrite,
			Description: "Grade one criterion of a review item assigned to this token's principal: grade \"PASS\", \"FAIL\" or a score between 0 " +
				"and 1, with an optional comment. Once every assigned review is in, the queue's rule (majority, all-pass or mean) grades the " +
				"plan's VERIFY. A review is never changed. Scope: grades:write.",
		}, nil, func(ctx context.Context, in *submitReviewArgs) (*evaluation.ReviewItemView, error) {
			body, err := json.Marshal(map[string]any{"criterionId": in.CriterionID, "grade": in.Grade, "comment": in.Comment})
			if err != nil {
				return nil, errs.Fields("invalid review", []errs.FieldError{{Path: "grade", Message: "must be PASS, FAIL or a score between 0 and 1"}})
			}
			v, err := h.Eval.SubmitReview(ctx, reviewerOf(ctx), in.QueueID, in.ItemID, body)
			return &v, err
		}),
	)
}

// putEvaluatorArgs are put_evaluator's arguments: the route's path
// parameters and its body (criteria and policy checked by the route's
// parser, which names their fields).
type putEvaluatorArgs struct {
	AgentID       string                   `json:"agentId"`
	Name          string                   `json:"name"`
	Criteria      []any                    `json:"criteria" jsonschema:"criteria as an ANTICIPATE declares them, each with an optional category; not HUMAN"`
	GradingPolicy any                      `json:"gradingPolicy,omitempty" jsonschema:"an RFC-032 grading_policy; absent: passing at 0.5"`
	Sample        float64                  `json:"sample" jsonschema:"the share of matching plans graded, more than 0 and at most 1"`
	Filter        *regrade.EvaluatorFilter `json:"filter,omitempty"`
}

// evaluatorResult is put_evaluator's result: the evaluator as its route
// answers it.
type evaluatorResult struct {
	AgentID       string                    `json:"agentId"`
	Name          string                    `json:"name"`
	Criteria      []map[string]any          `json:"criteria"`
	GradingPolicy *anticipate.GradingPolicy `json:"gradingPolicy,omitempty"`
	Sample        float64                   `json:"sample"`
	Filter        regrade.EvaluatorFilter   `json:"filter"`
	CreatedAt     string                    `json:"createdAt"`
	UpdatedAt     string                    `json:"updatedAt"`
}

// listReviewItemsArgs are list_review_items' arguments.
type listReviewItemsArgs struct {
	QueueID   string `json:"queueId"`
	Assignee  string `json:"assignee,omitempty" jsonschema:"me, or a principal's name; absent: every item this token may read"`
	State     string `json:"state,omitempty" jsonschema:"open (default) or done"`
	Limit     int    `json:"limit,omitempty"`
	NextToken string `json:"nextToken,omitempty"`
}

// submitReviewArgs are submit_review's arguments.
type submitReviewArgs struct {
	QueueID     string `json:"queueId"`
	ItemID      string `json:"itemId"`
	CriterionID string `json:"criterionId"`
	Grade       any    `json:"grade" jsonschema:"PASS, FAIL or a score between 0 and 1"`
	Comment     string `json:"comment,omitempty"`
}

// getEvaluationArgs are get_evaluation's arguments.
type getEvaluationArgs struct {
	EvaluationID string `json:"evaluationId"`
	Limit        int    `json:"limit,omitempty"`
	NextToken    string `json:"nextToken,omitempty"`
}

// CallTool calls the tool name with its arguments (a JSON object) on
// behalf of the principal in ctx, as its HTTP twin would: arguments over
// the body limit or nesting bound, or that do not decode strictly, are
// Invalid or TooLarge naming the field; a principal without the tool's
// scope or agent is Forbidden (none: Unauthorized); an unknown tool is
// NotFound; otherwise the error is the operation's.
func (h *Handler) CallTool(ctx context.Context, name string, args []byte) (any, error) {
	t, ok := h.tool(name)
	if !ok {
		return nil, errs.E(errs.NotFound, "no tool %q", name)
	}
	if err := Require(ctx, t.Scope, ""); err != nil {
		return nil, err
	}
	if err := checkBody(args, h.MaxBody, maxDepth); err != nil {
		return nil, prefixFields(err, "arguments")
	}
	in, err := t.decode(args)
	if err != nil {
		return nil, err
	}
	if t.agentOf != nil {
		agentID := t.agentOf(in)
		if msg := expect.ValidID(agentID); msg != "" {
			return nil, errs.Fields("invalid agent id", []errs.FieldError{{Path: "agentId", Message: msg}})
		}
		if err := Require(ctx, "", agentID); err != nil {
			return nil, err
		}
	}
	return t.call(ctx, in)
}

func (h *Handler) tool(name string) (Tool, bool) {
	for _, t := range h.Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// prefixFields returns err with prefix put before the path of each field it
// names (an event's fields are under "event." in its tool's arguments).
func prefixFields(err error, prefix string) error {
	var e *errs.Error
	if !errors.As(err, &e) || len(e.Fields) == 0 {
		return err
	}
	out := &errs.Error{Code: e.Code, Message: e.Message, Fields: make([]errs.FieldError, len(e.Fields))}
	for i, f := range e.Fields {
		switch {
		case f.Path == "":
			f.Path = strings.TrimSuffix(prefix, ".")
		case prefix == "arguments":
			f.Path = "arguments." + f.Path
		default:
			f.Path = prefix + f.Path
		}
		out.Fields[i] = f
	}
	return out
}

// mcpEnvelope is what an MCP request may add around a tool's arguments
// (the JSON-RPC message puts them two levels down; a batch, three): so many
// bytes and levels of nesting over the body bounds, so that the arguments
// themselves are bounded exactly like the twin's body, by CallTool, which
// names them.
const (
	mcpEnvelopeBytes = 64 << 10
	mcpEnvelopeDepth = 8
)

// mcp serves POST /mcp: the MCP endpoint (Streamable HTTP, stateless, JSON
// answers), served by h.MCP (internal/mcpapi) once the request is
// authenticated (authed) and every tools/call in it is authorised here, at
// the HTTP layer, like its twin: a token without the tool's scope is
// answered 403 with an insufficient_scope challenge naming the scope (the
// MCP authorization spec's scope challenge), a token that may not act for
// the arguments' agentId 403, both as problem+json, before any tool runs.
func (h *Handler) mcp(w http.ResponseWriter, r *http.Request) error {
	if h.MCP == nil {
		return errs.E(errs.NotFound, "this server does not serve MCP")
	}
	if origin := r.Header.Get("Origin"); origin != "" && !slices.Contains(h.MCPAllowedOrigins, origin) {
		return errs.E(errs.Forbidden, "origin %q may not call /mcp (allow it with -mcp-allowed-origins, MCP_ALLOWED_ORIGINS on AWS)", origin)
	}
	b, err := h.readBodyWithin(r, h.MaxBody+mcpEnvelopeBytes, maxDepth+mcpEnvelopeDepth)
	if err != nil {
		return err
	}
	msgs, err := rpcMessages(b)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if m.Method == "subscriptions/listen" {
			// A long-lived stream of notifications, which this server has
			// none of; on Lambda it would only hold the function.
			return errs.Fields("unsupported method", []errs.FieldError{{Path: "method", Message: "subscriptions/listen is not served: this server sends no notifications"}})
		}
		if m.Method != "tools/call" {
			continue
		}
		t, ok := h.tool(m.Params.Name)
		if !ok {
			continue // the MCP server answers an unknown tool
		}
		if err := Require(r.Context(), t.Scope, ""); err != nil {
			if errs.Is(err, errs.Forbidden) {
				w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="clockwork", error="insufficient_scope", scope=%q`, t.Scope))
			}
			return err
		}
		if t.agentOf == nil {
			continue
		}
		var a struct {
			AgentID *string `json:"agentId"`
		}
		if json.Unmarshal(m.Params.Arguments, &a) == nil && a.AgentID != nil && expect.ValidID(*a.AgentID) == "" {
			if err := Require(r.Context(), "", *a.AgentID); err != nil {
				return err
			}
		}
	}
	r = r.Clone(r.Context())
	r.Body = http.NoBody
	if len(b) > 0 {
		r.Body = readCloser{bytes.NewReader(b)}
	}
	r.ContentLength = int64(len(b))
	r.Header.Set("Content-Type", "application/json")
	// Answers are JSON, never a stream, so a client need not also accept
	// text/event-stream (curl, plain HTTP clients), as the transport asks.
	r.Header.Set("Accept", "application/json, text/event-stream")
	h.MCP.ServeHTTP(w, r)
	return nil
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// rpcMessage is what the HTTP layer reads of a JSON-RPC message.
type rpcMessage struct {
	Method string `json:"method"`
	Params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"params"`
}

// rpcMessages reads a JSON-RPC message or batch. Malformed JSON is Invalid;
// a message whose members do not have the expected types is returned empty
// (the MCP server answers it).
func rpcMessages(b []byte) ([]rpcMessage, error) {
	if !json.Valid(b) {
		var v any
		return nil, jsonError(json.Unmarshal(b, &v))
	}
	var raws []json.RawMessage
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		if json.Unmarshal(t, &raws) != nil {
			return nil, nil
		}
	} else {
		raws = []json.RawMessage{t}
	}
	out := make([]rpcMessage, 0, len(raws))
	for _, raw := range raws {
		var m rpcMessage
		_ = json.Unmarshal(raw, &m) // a mistyped member leaves m partial; the MCP server refuses the message
		out = append(out, m)
	}
	return out, nil
}
