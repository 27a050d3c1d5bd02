package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/watcher"
)

func (h *Handler) putCard(w http.ResponseWriter, r *http.Request) error {
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	card, err := h.Watcher.PutCard(r.Context(), r.PathValue("agentId"), b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, json.RawMessage(card.Raw))
	return nil
}

func (h *Handler) getCard(w http.ResponseWriter, r *http.Request) error {
	card, err := h.Watcher.Card(r.Context(), r.PathValue("agentId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, json.RawMessage(card.Raw))
	return nil
}

type recordsResponse struct {
	Records   []*expect.Record `json:"records"`
	NextToken string           `json:"nextToken,omitempty"`
}

func (h *Handler) raise(w http.ResponseWriter, r *http.Request) error {
	var req expect.RaiseRequest
	if err := h.Decode(r, &req); err != nil {
		return err
	}
	recs, err := h.Watcher.Raise(r.Context(), r.PathValue("agentId"), req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordsResponse{Records: recs})
	return nil
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) error {
	rec, err := h.Watcher.Get(r.Context(), r.PathValue("agentId"), r.PathValue("expectationId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	recs, next, err := h.Watcher.List(r.Context(), r.PathValue("agentId"), watcher.ListFilter{
		State: q.Get("state"), SubjectType: q.Get("subjectType"), SubjectID: q.Get("subjectId"),
		Limit: limit, NextToken: q.Get("nextToken"),
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordsResponse{Records: recs, NextToken: next})
	return nil
}

type factsRequest struct {
	Facts []expect.Fact `json:"facts"`
}

func (h *Handler) facts(w http.ResponseWriter, r *http.Request) error {
	var req factsRequest
	if err := h.Decode(r, &req); err != nil {
		return err
	}
	out, err := h.Watcher.ReportFacts(r.Context(), r.PathValue("agentId"), PrincipalOf(r.Context()).Name, req.Facts)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"facts": out})
	return nil
}

type withdrawRequest struct {
	Withdraw []string `json:"withdraw"`
	Reason   string   `json:"reason,omitempty"`
}

func (h *Handler) withdraw(w http.ResponseWriter, r *http.Request) error {
	var req withdrawRequest
	if err := h.Decode(r, &req); err != nil {
		return err
	}
	recs, err := h.Watcher.Withdraw(r.Context(), r.PathValue("agentId"), req.Withdraw, req.Reason)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordsResponse{Records: recs})
	return nil
}

func (h *Handler) redeliver(w http.ResponseWriter, r *http.Request) error {
	rec, err := h.Watcher.Redeliver(r.Context(), r.PathValue("agentId"), r.PathValue("expectationId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

func (h *Handler) deadLetters(w http.ResponseWriter, r *http.Request) error {
	p := PrincipalOf(r.Context())
	out := []*expect.Record{}
	err := h.Watcher.ForEachIndexed(r.Context(), watcher.DeadPK, func(rec *expect.Record) error {
		if p.ActsFor(rec.AgentID) && len(out) < watcher.MaxPageSize {
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, recordsResponse{Records: out})
	return nil
}

var _ = auth.Read
