package a2aout

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
)

// TestGetTask asks SDK agents of both versions about tasks they run: one
// waiting for input, then completed; one failed; one rejected; and one
// they never had.
func TestGetTask(t *testing.T) {
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			agent := a2atest.NewAgent(t, version)
			card := parseAgentCard(t, agent)
			s := localSender(5 * time.Second)
			get := func(id string) string {
				t.Helper()
				rt, err := s.GetTask(ctx, card, id)
				if err != nil {
					t.Fatalf("GetTask %s: %v", id, err)
				}
				if rt.At.IsZero() || time.Since(rt.At) > time.Minute {
					t.Errorf("task %s status recorded at %v", id, rt.At)
				}
				return rt.State
			}
			held := agent.StartTask(t)
			if got := get(held); got != "input-required" {
				t.Fatalf("a held task is %q", got)
			}
			agent.FinishTask(t, held, "complete")
			if got := get(held); got != "completed" {
				t.Fatalf("a completed task is %q", got)
			}
			for outcome, want := range map[string]string{"fail": "failed", "reject": "rejected"} {
				id := agent.StartTask(t)
				agent.FinishTask(t, id, outcome)
				if got := get(id); got != want {
					t.Fatalf("task %s after %q is %q, want %q", id, outcome, got, want)
				}
			}
			if _, err := s.GetTask(ctx, card, "no-such-task"); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Fatalf("an unknown task: %v", err)
			}
			if n := len(agent.Received()); n != 0 {
				t.Fatalf("the agent counted %d lapse messages", n)
			}
		})
	}
}

// TestSubscribeTaskNeverRedirectsTheToken: a push subscription carries a
// token of clockwork's own, so a redirect to another origin is refused
// even for an agent whose card declares no security scheme; and a real
// SDK agent of each version takes the subscription.
func TestSubscribeTaskNeverRedirectsTheToken(t *testing.T) {
	got := make(chan string, 1)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	defer elsewhere.Close()
	for _, version := range []string{"1.0", "0.3"} {
		agent := a2atest.NewAgent(t, version)
		card := parseAgentCard(t, agent)
		if err := localSender(5*time.Second).SubscribeTask(context.Background(), card, agent.StartTask(t), "http://127.0.0.1:9/push", "the-token"); err != nil {
			t.Fatalf("%s: %v", version, err)
		}
		redirecting := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusTemporaryRedirect))
		card.URL = redirecting.URL
		card.ProtocolVersion = "0.3"
		err := localSender(5*time.Second).SubscribeTask(context.Background(), card, "t", "http://127.0.0.1:9/push", "the-token")
		redirecting.Close()
		if !errors.Is(err, ErrCrossOriginRedirect) {
			t.Fatalf("%s: a redirect to another origin: %v", version, err)
		}
		select {
		case b := <-got:
			t.Fatalf("the token followed the redirect: %s", b)
		default:
		}
	}
}
