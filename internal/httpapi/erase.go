package httpapi

import (
	"context"
	"net/http"

	"github.com/agentclock/clockwork/internal/errs"
)

// erasedResponse says what DELETE /v1/agents/{agentId} removed, by item
// type, and what became of the agent's evidence.
type erasedResponse struct {
	AgentID  string         `json:"agentId"`
	Erased   map[string]int `json:"erased"`
	Evidence string         `json:"evidence"`
}

// eraseAgent serves DELETE /v1/agents/{agentId}[?evidence=true].
func (h *Handler) eraseAgent(w http.ResponseWriter, r *http.Request) error {
	agent := r.PathValue("agentId")
	withEvidence := false
	switch r.URL.Query().Get("evidence") {
	case "", "false":
	case "true":
		withEvidence = true
	default:
		return errs.Fields("bad query", []errs.FieldError{{Path: "evidence", Message: "must be true or false"}})
	}
	erased, err := h.Watcher.EraseAgent(r.Context(), agent)
	if err != nil && !errs.Is(err, errs.NotFound) {
		return err
	}
	if erased == nil {
		erased = map[string]int{}
	}
	out := erasedResponse{AgentID: agent, Erased: erased, Evidence: "kept until its own retention (erase it with ?evidence=true)"}
	if h.Notify != nil {
		// The tenant's channels go with the last of its agents.
		n, err := h.Notify.EraseOwner(r.Context(), agent, h.agentRemains)
		if err != nil {
			return err
		}
		if n > 0 {
			out.Erased["channel"] = n
		}
	}
	if withEvidence && h.Eval != nil {
		ev, err := h.Eval.EraseAgent(r.Context(), agent)
		if err != nil {
			return err
		}
		for k, v := range ev {
			out.Erased[k] += v
		}
		out.Evidence = "erased"
	}
	if len(out.Erased) == 0 {
		return errs.E(errs.NotFound, "nothing of agent %q is stored", agent)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// agentRemains reports whether agent still has a card.
func (h *Handler) agentRemains(ctx context.Context, agent string) (bool, error) {
	_, err := h.Watcher.Card(ctx, agent)
	if errs.Is(err, errs.NotFound) {
		return false, nil
	}
	return err == nil, err
}
