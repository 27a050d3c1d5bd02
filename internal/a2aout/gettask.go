package a2aout

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// GetTask asks the agent described by card for task taskID (A2A 1.0
// GetTask through the SDK; 0.3 tasks/get, a JSON-RPC request written here
// as send03 does) and returns its state, spelled the 0.3 way, and when the
// agent recorded that status. It presents the card's credentials as Send
// does and goes through the same guard. Errors: as Send's (a task the agent
// does not know matches a2a.ErrTaskNotFound). It never panics.
func (s *Sender) GetTask(ctx context.Context, card expect.Card, taskID string) (rt expect.RemoteTask, err error) {
	if s == nil || s.factory == nil {
		return rt, errs.E(errs.Internal, "a2aout: Sender not built with NewSender")
	}
	defer func() {
		if r := recover(); r != nil {
			rt, err = expect.RemoteTask{}, fmt.Errorf("a2aout: A2A client panicked: %v", r)
		}
	}()
	endpoint, err := endpointOf(card)
	if err != nil {
		return rt, err
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	plan, err := s.plan(ctx, card)
	if err != nil {
		return rt, fmt.Errorf("a2aout: get task %s of agent %q: %w", taskID, card.AgentID, err)
	}
	state := &callState{auth: plan}
	ctx = context.WithValue(ctx, callStateKey{}, state)
	wrap := func(err error) error {
		if code, retryAfter := state.status(); code == http.StatusUnauthorized || code == http.StatusForbidden {
			err = &AuthError{Schemes: plan.schemes, Missing: plan.missing, Unbound: plan.unbound, StatusCode: code, Err: err, tokens: plan.tokens}
		} else if code != 0 && code != http.StatusOK {
			err = &StatusError{StatusCode: code, RetryAfter: retryAfter, Err: err}
		}
		return fmt.Errorf("a2aout: get task %s of agent %q at %s: %w", taskID, card.AgentID, card.URL, err)
	}
	if card.ProtocolVersion == expect.ProtocolV03 {
		rt, err := s.getTask03(ctx, card, taskID)
		if err != nil {
			return rt, wrap(err)
		}
		return rt, nil
	}
	client, ctx, err := s.client10(ctx, card, endpoint, plan, wrap)
	if err != nil {
		return rt, err
	}
	defer func() { _ = client.Destroy() }()
	history := 0
	task, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(taskID), HistoryLength: &history})
	if err != nil {
		return rt, wrap(err)
	}
	if task == nil || string(task.ID) != taskID {
		return rt, wrap(fmt.Errorf("%w: no task %s in the answer", a2a.ErrInvalidAgentResponse, taskID))
	}
	rt.State = expect.NormalizeTaskState(string(task.Status.State))
	if task.Status.Timestamp != nil {
		rt.At = task.Status.Timestamp.UTC()
	}
	return rt, nil
}

// getTask03 asks a 0.3 agent for a task with tasks/get.
func (s *Sender) getTask03(ctx context.Context, card expect.Card, taskID string) (expect.RemoteTask, error) {
	var rt expect.RemoteTask
	var task struct {
		ID     string `json:"id"`
		Status struct {
			State     string `json:"state"`
			Timestamp string `json:"timestamp"`
		} `json:"status"`
	}
	if err := s.call03(ctx, card, "tasks/get", "get-"+taskID, map[string]any{"id": taskID, "historyLength": 0}, nil, &task); err != nil {
		return rt, err
	}
	if task.ID != taskID {
		return rt, fmt.Errorf("%w: no task %s in the answer", a2a.ErrInvalidAgentResponse, taskID)
	}
	rt.State = expect.NormalizeTaskState(task.Status.State)
	if t, err := time.Parse(time.RFC3339Nano, task.Status.Timestamp); err == nil {
		rt.At = t.UTC()
	}
	return rt, nil
}
