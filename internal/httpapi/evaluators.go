package httpapi

import (
	"net/http"
)

// The online evaluators of an agent (scope grades:write to change, read to
// read, a token acting for the agent): criteria that grade a sample of its
// plans that declared no ANTICIPATE.

func (h *Handler) putEvaluator(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	v, created, err := h.Eval.PutEvaluator(r.Context(), r.PathValue("agentId"), r.PathValue("name"), b)
	if err != nil {
		return err
	}
	writeJSON(w, createdOrOK(created), v)
	return nil
}

func (h *Handler) getEvaluator(w http.ResponseWriter, r *http.Request) error {
	v, err := h.Eval.Evaluator(r.Context(), r.PathValue("agentId"), r.PathValue("name"))
	return respond(w, http.StatusOK, v, err)
}

func (h *Handler) listEvaluators(w http.ResponseWriter, r *http.Request) error {
	vs, err := h.Eval.Evaluators(r.Context(), r.PathValue("agentId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"evaluators": vs})
	return nil
}

func (h *Handler) deleteEvaluator(w http.ResponseWriter, r *http.Request) error {
	if err := h.Eval.DeleteEvaluator(r.Context(), r.PathValue("agentId"), r.PathValue("name")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listEvaluatorVerifications is GET
// /v1/agents/{agentId}/evaluators/{name}/verifications?limit=&nextToken=.
func (h *Handler) listEvaluatorVerifications(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	page, err := h.Eval.EvaluatorVerifications(r.Context(), r.PathValue("agentId"), r.PathValue("name"), limit, r.URL.Query().Get("nextToken"))
	return respond(w, http.StatusOK, page, err)
}
