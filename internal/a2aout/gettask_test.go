package a2aout

import (
	"context"
	"errors"
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
