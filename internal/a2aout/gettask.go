package a2aout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/retry"
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
	client, err := s.factory.CreateFromEndpoints(ctx, []*a2a.AgentInterface{endpoint})
	if err != nil {
		return rt, &errs.Error{Code: errs.Invalid, Message: fmt.Sprintf("a2aout: no A2A client for %s (protocol %s): %v", card.URL, card.ProtocolVersion, err)}
	}
	defer func() { _ = client.Destroy() }()
	if plan.sdkCard != nil {
		plan.sdkCard.SupportedInterfaces = []*a2a.AgentInterface{endpoint}
		if err := client.UpdateCard(plan.sdkCard); err != nil {
			return rt, wrap(err)
		}
		ctx = a2aclient.AttachSessionID(ctx, a2aclient.SessionID(card.AgentID))
	}
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
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "get-" + taskID, "method": "tasks/get",
		"params": map[string]any{"id": taskID, "historyLength": 0}})
	if err != nil {
		return rt, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, card.URL, bytes.NewReader(body))
	if err != nil {
		return rt, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("A2A-Version", "0.3")
	res, err := s.http.Do(hreq)
	if err != nil {
		return rt, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, MaxResponseBytes+1))
	if err != nil {
		return rt, err
	}
	if res.StatusCode != http.StatusOK {
		return rt, &StatusError{StatusCode: res.StatusCode, RetryAfter: retry.ParseRetryAfter(res.Header.Get("Retry-After"), time.Now()),
			Err: fmt.Errorf("unexpected HTTP status %d", res.StatusCode)}
	}
	if len(raw) > MaxResponseBytes {
		return rt, fmt.Errorf("%w: response larger than %d bytes", a2a.ErrInvalidAgentResponse, MaxResponseBytes)
	}
	var rr struct {
		Result *struct {
			Kind   string `json:"kind"`
			ID     string `json:"id"`
			Status struct {
				State     string `json:"state"`
				Timestamp string `json:"timestamp"`
			} `json:"status"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &rr); err != nil {
		return rt, fmt.Errorf("%w: %v", a2a.ErrInvalidAgentResponse, err)
	}
	if rr.Error != nil {
		sentinel, ok := codes03[rr.Error.Code]
		if !ok {
			sentinel = a2a.ErrInternalError
		}
		return rt, fmt.Errorf("%w: JSON-RPC error %d: %s", sentinel, rr.Error.Code, rr.Error.Message)
	}
	if rr.Result == nil || rr.Result.ID != taskID {
		return rt, fmt.Errorf("%w: no task %s in the answer", a2a.ErrInvalidAgentResponse, taskID)
	}
	rt.State = expect.NormalizeTaskState(rr.Result.Status.State)
	if t, err := time.Parse(time.RFC3339Nano, rr.Result.Status.Timestamp); err == nil {
		rt.At = t.UTC()
	}
	return rt, nil
}
