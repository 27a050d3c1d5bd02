package watcher

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
)

// tokenCatcher is a TaskSubscriber that keeps the tokens it was given.
type tokenCatcher struct{ tokens map[string]string }

func (c *tokenCatcher) SubscribeTask(ctx context.Context, card expect.Card, taskID, url, token string) error {
	c.tokens[url] = token
	return nil
}

// TestWatchPushDecidesOnlyItsOwnExpectation: a push with the
// subscription's token decides the expectation; a wrong token or another
// task does not; and a subscription left by an earlier expectation of the
// same id (its record expired, the id raised again) neither decides the
// new one nor keeps it from being subscribed.
func TestWatchPushDecidesOnlyItsOwnExpectation(t *testing.T) {
	ctx := context.Background()
	svc, clock, st := newTestService(t, expect.DefaultConfig())
	if _, err := svc.PutCard(ctx, "agent-2", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	catcher := &tokenCatcher{tokens: map[string]string{}}
	svc.SetWatchPush("https://clockwork.example.com", catcher)
	raise := func(id string) *expect.Record {
		t.Helper()
		recs, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
			paymentExpectation(id, clock.now().Add(time.Hour), func(e *expect.Expectation) {
				e.WatchTask = &expect.WatchTask{AgentID: "agent-2", TaskID: "task-" + id}
			})}})
		if err != nil {
			t.Fatal(err)
		}
		return recs[0]
	}
	completed := expect.RemoteTask{State: "completed", At: clock.now()}

	// A subscription an earlier expectation "w" left behind.
	stale, _ := json.Marshal(subscription{AgentID: "agent-1", ExpectationID: "w", RaisedAt: "2020-01-01T00:00:00Z", WatchedAgent: "agent-2", TaskID: "task-w", TokenSHA256: tokenHash("old-token")})
	if err := st.Commit(ctx, []store.Write{{Put: &store.Item{Key: WatchKey("agent-1", "w"), Type: TypeWatch, Data: stale}}}); err != nil {
		t.Fatal(err)
	}
	r := raise("w")
	if err := svc.WatchPush(ctx, "agent-1", "w", "old-token", "task-w", completed); err != nil {
		t.Fatal(err)
	}
	if got, _ := svc.Get(ctx, "agent-1", "w"); got.State != expect.StateOpen {
		t.Fatalf("an earlier expectation's subscription decided the new one: %s", got.State)
	}
	if err := svc.SubscribeWatch(ctx, r); err != nil {
		t.Fatal(err)
	}
	token := catcher.tokens["https://clockwork.example.com"+WatchPushPath("agent-1", "w")]
	if token == "" || token == "old-token" {
		t.Fatalf("the new expectation was not subscribed (token %q)", token)
	}
	// Again (a replayed change): the same subscription, not asked again.
	delete(catcher.tokens, "https://clockwork.example.com"+WatchPushPath("agent-1", "w"))
	if err := svc.SubscribeWatch(ctx, r); err != nil || len(catcher.tokens) != 0 {
		t.Fatalf("a replayed change subscribed again: %v %v", catcher.tokens, err)
	}
	for _, c := range []struct {
		token, task string
		code        errs.Code
	}{
		{"old-token", "task-w", errs.NotFound},
		{"", "task-w", errs.NotFound},
		{token, "task-other", errs.Invalid},
	} {
		if err := svc.WatchPush(ctx, "agent-1", "w", c.token, c.task, completed); !errs.Is(err, c.code) {
			t.Errorf("token %q task %q: %v, want %s", c.token, c.task, err, c.code)
		}
	}
	if err := svc.WatchPush(ctx, "agent-1", "nobody", token, "task-w", completed); !errs.Is(err, errs.NotFound) {
		t.Errorf("the token on another expectation: %v", err)
	}
	if got, _ := svc.Get(ctx, "agent-1", "w"); got.State != expect.StateOpen {
		t.Fatalf("a refused push decided it: %s", got.State)
	}
	if err := svc.WatchPush(ctx, "agent-1", "w", token, "task-w", completed); err != nil {
		t.Fatal(err)
	}
	if got, _ := svc.Get(ctx, "agent-1", "w"); got.State != expect.StateSatisfied || got.SatisfiedBy.Source != "a2a-task:agent-2/task-w" {
		t.Fatalf("the push did not satisfy it: %+v", got)
	}
}
