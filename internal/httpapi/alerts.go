package httpapi

import (
	"net/http"
	"strconv"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/notify"
)

// The alerting routes: channels (operators, channels:write), each agent's
// rules (agents:write for that agent), dead letters and replay. A channel
// is visible to the principals acting for one of its owners (the agents of
// the token that created it); another tenant's channel answers 404 as if
// it did not exist.

func (h *Handler) alerts() (*notify.Service, error) {
	if h.Notify == nil {
		return nil, errs.E(errs.Unavailable, "this server sends no notifications")
	}
	return h.Notify, nil
}

func (h *Handler) putChannel(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	v, created, err := n.PutChannel(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("channelId"), b)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, createdOrOK(created), v)
	return nil
}

func (h *Handler) getChannel(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	c, err := n.Channel(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("channelId"))
	return respond(w, http.StatusOK, c, err)
}

func (h *Handler) listChannels(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	cs, err := n.Channels(r.Context(), PrincipalOf(r.Context()).Agents)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"channels": cs})
	return nil
}

func (h *Handler) deleteChannel(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	if err := n.DeleteChannel(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("channelId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) testChannel(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	res, err := n.TestChannel(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("channelId"))
	return respond(w, http.StatusOK, res, err)
}

func (h *Handler) channelDeadLetters(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	limit := 100
	if v := r.URL.Query().Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return errs.Fields("bad query", []errs.FieldError{{Path: "limit", Message: "must be an integer from 1 to 1000"}})
		}
	}
	p, err := n.DeadLetters(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("channelId"), limit, r.URL.Query().Get("after"))
	return respond(w, http.StatusOK, p, err)
}

func (h *Handler) replayNotification(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	agent := r.URL.Query().Get("agentId")
	if agent == "" {
		return errs.Fields("bad query", []errs.FieldError{{Path: "agentId", Message: "is required: the agent the notification belongs to"}})
	}
	out, err := n.Replay(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("channelId"), agent, r.PathValue("notificationId"))
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) putAlerts(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	agent := r.PathValue("agentId")
	if _, err := h.Watcher.Card(r.Context(), agent); err != nil {
		return err
	}
	rules, err := n.PutRules(r.Context(), PrincipalOf(r.Context()).Agents, agent, b)
	return respond(w, http.StatusOK, rules, err)
}

func (h *Handler) getAlerts(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	rules, err := n.Rules(r.Context(), r.PathValue("agentId"))
	return respond(w, http.StatusOK, rules, err)
}

func (h *Handler) deleteAlerts(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	if err := n.DeleteRules(r.Context(), r.PathValue("agentId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) listNotifications(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	agent := r.PathValue("agentId")
	q := r.URL.Query()
	var out []*alert.Notification
	switch {
	case q.Get("expectationId") != "":
		out, err = n.ForExpectation(r.Context(), agent, q.Get("expectationId"), 100)
	case q.Get("planId") != "":
		out, err = n.ForPlan(r.Context(), agent, q.Get("planId"), 100)
	default:
		return errs.Fields("bad query", []errs.FieldError{{Path: "expectationId", Message: "expectationId or planId is required"}})
	}
	if err != nil {
		return err
	}
	// What a channel's receiver answered is its owner's to read: on a
	// shared channel the caller does not own, only the failure's class.
	if err := n.RedactForeignErrors(r.Context(), PrincipalOf(r.Context()).Agents, out); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"notifications": out})
	return nil
}

// The silences' routes (channels:write to change, read to list): a tenant
// silences its own agents; an operator any or all.

func (h *Handler) putSilence(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	p := PrincipalOf(r.Context())
	sil, created, err := n.PutSilence(r.Context(), p.Name, p.Agents, r.PathValue("silenceId"), b)
	if err != nil {
		return err
	}
	writeJSON(w, createdOrOK(created), sil)
	return nil
}

func (h *Handler) getSilence(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	sil, err := n.Silence(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("silenceId"))
	return respond(w, http.StatusOK, sil, err)
}

func (h *Handler) listSilences(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	out, err := n.Silences(r.Context(), PrincipalOf(r.Context()).Agents)
	return respond(w, http.StatusOK, map[string]any{"silences": out}, err)
}

func (h *Handler) deleteSilence(w http.ResponseWriter, r *http.Request) error {
	n, err := h.alerts()
	if err != nil {
		return err
	}
	if err := n.DeleteSilence(r.Context(), PrincipalOf(r.Context()).Agents, r.PathValue("silenceId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
