package a2aout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
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
	client, ctx, err := s.client10(ctx, card, endpoint, plan, wrap)
	if err != nil {
		return err
	}
	defer func() { _ = client.Destroy() }()
	_, err = client.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: a2a.TaskID(taskID), URL: url, Token: token,
		Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: token}})
	if err != nil {
		return wrap(err)
	}
	return nil
}

// subscribe03 sets a 0.3 agent's push notification config for a task.
func (s *Sender) subscribe03(ctx context.Context, card expect.Card, taskID, url, token string) error {
	var config json.RawMessage
	return s.call03(ctx, card, "tasks/pushNotificationConfig/set", "subscribe-"+taskID, map[string]any{"taskId": taskID,
		"pushNotificationConfig": map[string]any{"url": url, "token": token, "authentication": map[string]any{"schemes": []string{"Bearer"}, "credentials": token}}},
		nil, &config)
}
