package httpapi

import (
	"net/http"

	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/errs"
)

// configuredResponse answers every credentials route: the scheme names the
// agent has credentials for, never a secret; and on GET, the schemes whose
// credentials a card change dropped since they were last PUT.
type configuredResponse struct {
	Configured []string              `json:"configured"`
	Dropped    []credentials.Dropped `json:"dropped,omitempty"`
}

func (h *Handler) putCredentials(w http.ResponseWriter, r *http.Request) error {
	if h.Credentials == nil {
		return errs.E(errs.Unavailable, "this server keeps no outbound credentials")
	}
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	card, err := h.Watcher.Card(r.Context(), r.PathValue("agentId"))
	if err != nil {
		return err
	}
	names, err := h.Credentials.Put(r.Context(), card, b)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, configuredResponse{Configured: names})
	return nil
}

func (h *Handler) getCredentials(w http.ResponseWriter, r *http.Request) error {
	if h.Credentials == nil {
		return errs.E(errs.Unavailable, "this server keeps no outbound credentials")
	}
	if _, err := h.Watcher.Card(r.Context(), r.PathValue("agentId")); err != nil {
		return err
	}
	names, err := h.Credentials.Configured(r.Context(), r.PathValue("agentId"))
	if err != nil {
		return err
	}
	dropped, err := h.Credentials.DroppedOf(r.Context(), r.PathValue("agentId"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, configuredResponse{Configured: names, Dropped: dropped})
	return nil
}

func (h *Handler) deleteCredentials(w http.ResponseWriter, r *http.Request) error {
	if h.Credentials == nil {
		return errs.E(errs.Unavailable, "this server keeps no outbound credentials")
	}
	if _, err := h.Watcher.Card(r.Context(), r.PathValue("agentId")); err != nil {
		return err
	}
	if err := h.Credentials.Delete(r.Context(), r.PathValue("agentId")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, configuredResponse{Configured: []string{}})
	return nil
}
