package httpapi

import (
	"context"
	"net/http"

	"github.com/agentclock/clockwork/internal/heartbeat"
)

// The heartbeat routes (docs/heartbeats.md): each period is an ordinary
// expectation of the agent, kept by the watcher.

type heartbeatArgs struct {
	AgentID string `json:"agentId"`
	Name    string `json:"name"`
}

type putHeartbeatArgs struct {
	heartbeatArgs
	heartbeat.Spec
}

type heartbeatsResponse struct {
	Heartbeats []heartbeat.View `json:"heartbeats"`
	NextToken  string           `json:"nextToken,omitempty"`
}

type listHeartbeatsArgs struct {
	AgentID   string `json:"agentId"`
	Limit     int    `json:"limit,omitempty"`
	NextToken string `json:"nextToken,omitempty"`
}

func pathHeartbeat(r *http.Request) heartbeatArgs {
	return heartbeatArgs{AgentID: r.PathValue("agentId"), Name: r.PathValue("name")}
}

func (h *Handler) putHeartbeat(w http.ResponseWriter, r *http.Request) error {
	in := putHeartbeatArgs{heartbeatArgs: pathHeartbeat(r)}
	if err := h.Decode(r, &in.Spec); err != nil {
		return err
	}
	view, created, err := h.Watcher.PutHeartbeat(r.Context(), in.AgentID, in.Name, in.Spec)
	if err != nil {
		return err
	}
	writeJSON(w, createdOrOK(created), view)
	return nil
}

func (h *Handler) putHeartbeatOp(ctx context.Context, in *putHeartbeatArgs) (heartbeat.View, error) {
	view, _, err := h.Watcher.PutHeartbeat(ctx, in.AgentID, in.Name, in.Spec)
	return view, err
}

func (h *Handler) getHeartbeat(w http.ResponseWriter, r *http.Request) error {
	in := pathHeartbeat(r)
	out, err := h.getHeartbeatOp(r.Context(), &in)
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) getHeartbeatOp(ctx context.Context, in *heartbeatArgs) (heartbeat.View, error) {
	return h.Watcher.GetHeartbeat(ctx, in.AgentID, in.Name)
}

func (h *Handler) listHeartbeats(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryInt(r, "limit")
	if err != nil {
		return err
	}
	out, err := h.listHeartbeatsOp(r.Context(), &listHeartbeatsArgs{AgentID: r.PathValue("agentId"), Limit: limit, NextToken: r.URL.Query().Get("nextToken")})
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) listHeartbeatsOp(ctx context.Context, in *listHeartbeatsArgs) (heartbeatsResponse, error) {
	views, next, err := h.Watcher.ListHeartbeats(ctx, in.AgentID, in.Limit, in.NextToken)
	return heartbeatsResponse{Heartbeats: views, NextToken: next}, err
}

// ping serves POST .../ping, .../ping/start and .../ping/fail: no body
// is needed (a cron job's curl sends none), and any body is ignored, as
// Healthchecks.io ignores it.
func (h *Handler) ping(sig heartbeat.Signal) func(http.ResponseWriter, *http.Request) error {
	op := h.pingOp(sig)
	return func(w http.ResponseWriter, r *http.Request) error {
		in := pathHeartbeat(r)
		out, err := op(r.Context(), &in)
		return respond(w, http.StatusOK, out, err)
	}
}

// pingOp is the operation of a ping route (and its tool) with signal sig,
// from the authenticated caller.
func (h *Handler) pingOp(sig heartbeat.Signal) func(context.Context, *heartbeatArgs) (heartbeat.View, error) {
	return func(ctx context.Context, in *heartbeatArgs) (heartbeat.View, error) {
		return h.Watcher.PingHeartbeat(ctx, in.AgentID, in.Name, PrincipalOf(ctx).Name, sig)
	}
}

func (h *Handler) pauseHeartbeat(w http.ResponseWriter, r *http.Request) error {
	in := pathHeartbeat(r)
	out, err := h.Watcher.PauseHeartbeat(r.Context(), in.AgentID, in.Name)
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) resumeHeartbeat(w http.ResponseWriter, r *http.Request) error {
	in := pathHeartbeat(r)
	out, err := h.Watcher.ResumeHeartbeat(r.Context(), in.AgentID, in.Name)
	return respond(w, http.StatusOK, out, err)
}

func (h *Handler) deleteHeartbeat(w http.ResponseWriter, r *http.Request) error {
	in := pathHeartbeat(r)
	if err := h.Watcher.DeleteHeartbeat(r.Context(), in.AgentID, in.Name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
