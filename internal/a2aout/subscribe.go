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

// SubscribeTask asks the agent described by card to push the updates of
// task taskID to url, with token both as the config's token (sent back as
// A2A-Notification-Token, or X-A2A-Notification-Token by 0.3 agents) and
// as Bearer credentials: A2A 1.0 CreateTaskPushNotificationConfig through
// the SDK, 0.3 tasks/pushNotificationConfig/set written here as send03
// does. It presents the card's credentials as Send does. Errors: as
// Send's; an agent without push notifications answers one matching
// a2a.ErrPushNotificationNotSupported. It never panics.
func (s *Sender) SubscribeTask(ctx context.Context, card expect.Card, taskID, url, token string) (err error) {
	if s == nil || s.factory == nil {
		return errs.E(errs.Internal, "a2aout: Sender not built with NewSender")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("a2aout: A2A client panicked: %v", r)
		}
	}()
	endpoint, err := endpointOf(card)
	if err != nil {
		return err
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	plan, err := s.plan(ctx, card)
	if err != nil {
		return fmt.Errorf("a2aout: subscribe to task %s of agent %q: %w", taskID, card.AgentID, err)
	}
	// The token is ours: no redirect carries it to another origin.
	state := &callState{auth: plan, secret: true}
	ctx = context.WithValue(ctx, callStateKey{}, state)
	wrap := func(err error) error {
		if code, retryAfter := state.status(); code != 0 && code != http.StatusOK {
			err = &StatusError{StatusCode: code, RetryAfter: retryAfter, Err: err}
		}
		return fmt.Errorf("a2aout: subscribe to task %s of agent %q at %s: %w", taskID, card.AgentID, card.URL, err)
	}
	if card.ProtocolVersion == expect.ProtocolV03 {
		if err := s.subscribe03(ctx, card, taskID, url, token); err != nil {
			return wrap(err)
		}
		return nil
	}
	client, err := s.factory.CreateFromEndpoints(ctx, []*a2a.AgentInterface{endpoint})
	if err != nil {
		return &errs.Error{Code: errs.Invalid, Message: fmt.Sprintf("a2aout: no A2A client for %s (protocol %s): %v", card.URL, card.ProtocolVersion, err)}
	}
	defer func() { _ = client.Destroy() }()
	if plan.sdkCard != nil {
		plan.sdkCard.SupportedInterfaces = []*a2a.AgentInterface{endpoint}
		if err := client.UpdateCard(plan.sdkCard); err != nil {
			return wrap(err)
		}
		ctx = a2aclient.AttachSessionID(ctx, a2aclient.SessionID(card.AgentID))
	}
	_, err = client.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: a2a.TaskID(taskID), URL: url, Token: token,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: token}})
	if err != nil {
		return wrap(err)
	}
	return nil
}

// subscribe03 sets a 0.3 agent's push notification config for a task.
func (s *Sender) subscribe03(ctx context.Context, card expect.Card, taskID, url, token string) error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "subscribe-" + taskID, "method": "tasks/pushNotificationConfig/set",
		"params": map[string]any{"taskId": taskID, "pushNotificationConfig": map[string]any{"url": url, "token": token,
			"authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": token}}}})
	if err != nil {
		return err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, card.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("A2A-Version", "0.3")
	res, err := s.http.Do(hreq)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, MaxResponseBytes+1))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return &StatusError{StatusCode: res.StatusCode, RetryAfter: retry.ParseRetryAfter(res.Header.Get("Retry-After"), time.Now()),
			Err: fmt.Errorf("unexpected HTTP status %d", res.StatusCode)}
	}
	var rr struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &rr); err != nil {
		return fmt.Errorf("%w: %v", a2a.ErrInvalidAgentResponse, err)
	}
	if rr.Error != nil {
		sentinel, ok := codes03[rr.Error.Code]
		if !ok {
			sentinel = a2a.ErrInternalError
		}
		return fmt.Errorf("%w: JSON-RPC error %d: %s", sentinel, rr.Error.Code, rr.Error.Message)
	}
	if len(rr.Result) == 0 {
		return fmt.Errorf("%w: no result", a2a.ErrInvalidAgentResponse)
	}
	return nil
}
