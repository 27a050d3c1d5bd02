package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// watchPushBody is what a watched task's agent pushes: an A2A 1.0
// StreamResponse (task or statusUpdate) or a bare Task or 0.3 status
// update. Only the task's id, state and time are read.
type watchPushBody struct {
	Task         *watchPushTask `json:"task"`
	StatusUpdate *watchPushTask `json:"statusUpdate"`
	watchPushTask
}

type watchPushTask struct {
	ID     string `json:"id"`
	TaskID string `json:"taskId"`
	Status *struct {
		State     string `json:"state"`
		Timestamp string `json:"timestamp"`
	} `json:"status"`
}

// watchPush serves POST /v1/watches/{agentId}/{expectationId}, where the
// agent of an expectation's watched task pushes the task's updates
// (watcher.Service.SubscribeWatch). It needs no bearer token of the
// tokens file: the subscription's own token, in A2A-Notification-Token
// (1.0), X-A2A-Notification-Token (0.3) or Authorization: Bearer, is the
// credential. A wrong token and an unknown subscription both answer 404.
// An update without a task state (a message, an artifact) changes nothing.
func (h *Handler) watchPush(w http.ResponseWriter, r *http.Request) error {
	token := r.Header.Get("A2A-Notification-Token")
	if token == "" {
		token = r.Header.Get("X-A2A-Notification-Token")
	}
	if token == "" {
		token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	b, err := h.readBody(r)
	if err != nil {
		return err
	}
	var body watchPushBody
	if err := json.Unmarshal(b, &body); err != nil {
		return jsonErrorIn(b, err)
	}
	t := &body.watchPushTask
	switch {
	case body.Task != nil:
		t = body.Task
	case body.StatusUpdate != nil:
		t = body.StatusUpdate
	}
	taskID := t.ID
	if body.Task == nil && t.TaskID != "" {
		taskID = t.TaskID
	}
	if t.Status == nil || t.Status.State == "" || taskID == "" {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	rt := expect.RemoteTask{State: expect.NormalizeTaskState(t.Status.State)}
	if at, err := time.Parse(time.RFC3339Nano, t.Status.Timestamp); err == nil {
		rt.At = at.UTC()
	}
	if err := h.Watcher.WatchPush(r.Context(), r.PathValue("agentId"), r.PathValue("expectationId"), token, taskID, rt); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
