package httpapi

import (
	"context"
	"net/http"

	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/regrade"
)

// startEvaluation is POST /v1/evaluations: it answers 202 with the job
// (state running, or done when the filter matched no plan) and its
// Location; the results follow at GET /v1/evaluations/{evaluationId}.
func (h *Handler) startEvaluation(w http.ResponseWriter, r *http.Request) error {
	var req regrade.Request
	if err := h.Decode(r, &req); err != nil {
		return err
	}
	v, err := h.startEvaluationOp(r.Context(), req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/evaluations/"+v.EvaluationID)
	writeJSON(w, http.StatusAccepted, v)
	return nil
}

// startEvaluationOp is shared by the route and its MCP tool.
func (h *Handler) startEvaluationOp(ctx context.Context, req regrade.Request) (*evaluation.EvaluationView, error) {
	rec, err := h.Eval.StartEvaluation(ctx, req, PrincipalOf(ctx).Name, callerCtx(ctx))
	if err != nil {
		return nil, err
	}
	// The job as stored: a new one has no results to read back.
	v := rec.View()
	return &v, nil
}

// listEvaluations is GET /v1/agents/{agentId}/evaluations?limit=&nextToken=.
func (h *Handler) listEvaluations(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := h.Eval.EvaluationsOf(r.Context(), r.PathValue("agentId"), limit, r.URL.Query().Get("nextToken"), actsFor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// getEvaluation is GET /v1/evaluations/{evaluationId}?limit=&nextToken=.
func (h *Handler) getEvaluation(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	v, err := h.Eval.Evaluation(r.Context(), r.PathValue("evaluationId"), limit, r.URL.Query().Get("nextToken"), actsFor(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
