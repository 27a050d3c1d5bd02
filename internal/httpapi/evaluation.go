package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/evaluation"
)

func actsFor(r *http.Request) evaluation.Authorizer { return actsForCtx(r.Context()) }

func actsForCtx(ctx context.Context) evaluation.Authorizer {
	p := PrincipalOf(ctx)
	return func(agentID string) bool { return p != nil && p.ActsFor(agentID) }
}

// callerCtx is the evaluation service's view of the request's principal.
func callerCtx(ctx context.Context) evaluation.Caller {
	c := evaluation.Caller{May: actsForCtx(ctx)}
	if p := PrincipalOf(ctx); p != nil {
		c.Only = p.SingleAgent()
	}
	return c
}

func (h *Handler) declare(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	out, created, err := h.declareOp(r.Context(), b)
	if err != nil {
		return err
	}
	writeJSON(w, createdOrOK(created), out)
	return nil
}

// createdOrOK is the status of a PUT or POST that created (201) or found
// or replaced (200) what it names.
func createdOrOK(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// declareOp is shared by the route and its MCP tool (tools.go).
func (h *Handler) declareOp(ctx context.Context, raw []byte) (evaluation.Declared, bool, error) {
	return h.Eval.Declare(ctx, raw, PrincipalOf(ctx).Name, actsForCtx(ctx))
}

func (h *Handler) replace(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	out, err := h.Eval.Replace(r.Context(), r.PathValue("id"), b, PrincipalOf(r.Context()).Name, actsFor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

type anticipationResponse struct {
	Anticipation any    `json:"anticipation"`
	Sealed       bool   `json:"sealed"`
	SealedAt     string `json:"sealed_at,omitempty"`
	Digest       string `json:"digest"`
	Emitter      string `json:"emitter"`
	DeclaredBy   string `json:"declared_by"`
	ExpiresAt    string `json:"expires_at,omitempty"`
}

func (h *Handler) getAnticipation(w http.ResponseWriter, r *http.Request) error {
	rec, err := h.Eval.Anticipation(r.Context(), r.PathValue("id"), r.URL.Query().Get("agent_id"), callerCtx(r.Context()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, anticipationResponse{Anticipation: rec.Anticipation, Sealed: rec.Sealed, SealedAt: rec.SealedAt, Digest: rec.Digest, Emitter: rec.Emitter, DeclaredBy: rec.DeclaredBy, ExpiresAt: rec.ExpiresAt})
	return nil
}

func (h *Handler) listVerifications(w http.ResponseWriter, r *http.Request) error {
	vs, err := h.Eval.Verifications(r.Context(), r.PathValue("id"), r.URL.Query().Get("agent_id"), callerCtx(r.Context()))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"verifications": vs})
	return nil
}

// eventArgs are the route's path parameter and body (the event, kept as
// sent) in one object, for its MCP tool.
type eventArgs struct {
	PlanID string          `json:"planId"`
	Event  json.RawMessage `json:"event"`
}

func (h *Handler) appendEvent(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	out, err := h.appendEventOp(r.Context(), &eventArgs{PlanID: r.PathValue("planId"), Event: b})
	return respond(w, http.StatusAccepted, out, err)
}

func (h *Handler) appendEventOp(ctx context.Context, in *eventArgs) (evaluation.Appended, error) {
	return h.Eval.AppendEvent(ctx, in.PlanID, in.Event, callerCtx(ctx))
}

func (h *Handler) listEvents(w http.ResponseWriter, r *http.Request) error {
	ex, err := h.Eval.ExecutionFor(r.Context(), r.PathValue("planId"), r.URL.Query().Get("agent_id"), callerCtx(r.Context()))
	if err != nil {
		return err
	}
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	evs, next, err := h.Eval.EventsPage(r.Context(), ex, evaluation.EventsPageRequest{Limit: limit, NextToken: r.URL.Query().Get("nextToken")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, eventsResponse{Execution: ex, Events: evs, NextToken: next})
	return nil
}

// eventsResponse is one page of GET /v1/executions/{planId}/events: the
// execution state (on every page) and the page's events; NextToken is
// present when more events follow.
type eventsResponse struct {
	Execution *evaluation.Execution    `json:"execution"`
	Events    []evaluation.StoredEvent `json:"events"`
	NextToken string                   `json:"nextToken,omitempty"`
}

func (h *Handler) getVerification(w http.ResponseWriter, r *http.Request) error {
	vr, err := h.Eval.Verification(r.Context(), r.PathValue("verificationId"), actsFor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, vr.Verification)
	return nil
}

type gradeRequest struct {
	CriterionID string   `json:"criterion_id"`
	Score       *float64 `json:"score"`
	Rationale   string   `json:"rationale,omitempty"`
}

func (h *Handler) grade(w http.ResponseWriter, r *http.Request) error {
	var req gradeRequest
	if err := h.Decode(r, &req); err != nil {
		return err
	}
	var c errs.Collector
	if req.CriterionID == "" {
		c.Add("criterion_id", "is required")
	}
	if req.Score == nil {
		c.Add("score", "is required (a number in [0, 1])")
	}
	if err := c.Err("invalid grade"); err != nil {
		return err
	}
	v, err := h.Eval.SubmitGrade(r.Context(), r.PathValue("verificationId"), req.CriterionID, *req.Score, req.Rationale, "human:"+PrincipalOf(r.Context()).Name, actsFor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (h *Handler) verifyKey(w http.ResponseWriter, r *http.Request) error {
	pub := h.Eval.PublicKey()
	if pub == nil {
		return errs.E(errs.NotFound, "this server does not sign VERIFY messages")
	}
	writeJSON(w, http.StatusOK, map[string]string{"alg": "Ed25519", "public_key": base64.RawURLEncoding.EncodeToString(pub)})
	return nil
}
