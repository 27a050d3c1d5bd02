package watcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
)

// taskAnswers is a TaskReader that answers from a map and notes, at each
// question, the state of the plain expectation (to see what was committed
// before it was asked).
type taskAnswers struct {
	mu       sync.Mutex
	svc      *Service
	states   map[string]expect.RemoteTask
	asked    []string
	plainWas expect.State
}

func (a *taskAnswers) GetTask(ctx context.Context, card expect.Card, taskID string) (expect.RemoteTask, error) {
	r, _ := a.svc.Get(ctx, "agent-1", "plain")
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, card.AgentID+"/"+taskID)
	if r != nil {
		a.plainWas = r.State
	}
	rt, ok := a.states[taskID]
	if !ok {
		return rt, errors.New("task not found")
	}
	return rt, nil
}

// TestTickAsksWatchedTasksAfterTheRest: in one batch of instants, the
// expectations that watch no task are committed before any agent is asked
// about a task (a slow agent delays only its watchers); then a completed
// task satisfies its watcher, a failed one refutes its, an unknown one
// lets its watcher lapse overdue; and a task is not asked about at an
// instant that is not its due or grace.
func TestTickAsksWatchedTasksAfterTheRest(t *testing.T) {
	ctx := context.Background()
	svc, clock, _ := newTestService(t, expect.DefaultConfig())
	if _, err := svc.PutCard(ctx, "agent-2", a2atest.NewAgent(t, "1.0").Card()); err != nil {
		t.Fatal(err)
	}
	tr := &taskAnswers{svc: svc, states: map[string]expect.RemoteTask{
		"t-done": {State: "completed", At: clock.now()}, "t-failed": {State: "failed"}}}
	svc.SetTaskReader(tr)
	due := clock.now().Add(time.Minute)
	watching := func(task string) func(*expect.Expectation) {
		return func(e *expect.Expectation) { e.WatchTask = &expect.WatchTask{AgentID: "agent-2", TaskID: task} }
	}
	recs, err := svc.Raise(ctx, "agent-1", expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
		paymentExpectation("plain", due, nil),
		paymentExpectation("w-done", due, watching("t-done")),
		paymentExpectation("w-failed", due, watching("t-failed")),
		paymentExpectation("w-unknown", due, watching("t-unknown")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute + time.Second)
	var ins []expect.Instant
	for _, r := range recs {
		in, _ := expect.NextInstant(r)
		ins = append(ins, in)
	}
	if _, err := svc.TickDue(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if tr.plainWas != expect.StateLapsed || len(tr.asked) != 3 {
		t.Fatalf("asked %v with the plain expectation %s, want it lapsed before any question", tr.asked, tr.plainWas)
	}
	want := map[string]func(*expect.Record) bool{
		"w-done": func(r *expect.Record) bool {
			return r.State == expect.StateSatisfied && r.SatisfiedBy.Source == "a2a-task:agent-2/t-done"
		},
		"w-failed":  func(r *expect.Record) bool { return r.State == expect.StateLapsed && r.Lapse.Lapse == expect.Refuted },
		"w-unknown": func(r *expect.Record) bool { return r.State == expect.StateLapsed && r.Lapse.Lapse == expect.Overdue },
	}
	for id, ok := range want {
		if r, _ := svc.Get(ctx, "agent-1", id); !ok(r) {
			t.Errorf("%s: %+v (lapse %+v)", id, r, r.Lapse)
		}
	}
	// Ticking again asks nothing (none is open).
	if _, err := svc.TickDue(ctx, ins); err != nil || len(tr.asked) != 3 {
		t.Fatalf("a repeated tick asked %v (%v)", tr.asked, err)
	}
}

// blockingReader answers agent-slow's questions only when the question is
// given up (its context ends), and counts the questions.
type blockingReader struct {
	mu    sync.Mutex
	asked int
}

func (b *blockingReader) GetTask(ctx context.Context, card expect.Card, taskID string) (expect.RemoteTask, error) {
	b.mu.Lock()
	b.asked++
	b.mu.Unlock()
	<-ctx.Done()
	return expect.RemoteTask{}, ctx.Err()
}

// TestWatchedAgentsCannotHoldTheClock: answers are kept per agent (two
// agents' expectations of one id get their own), and an agent that never
// answers is given up on within the batch's budget (its watchers lapse
// overdue as usual), and not asked again for a while.
func TestWatchedAgentsCannotHoldTheClock(t *testing.T) {
	ctx := context.Background()
	svc, clock, _ := newTestService(t, expect.DefaultConfig())
	for _, a := range []string{"agent-2", "agent-b", "agent-slow"} {
		if _, err := svc.PutCard(ctx, a, a2atest.NewAgent(t, "1.0").Card()); err != nil {
			t.Fatal(err)
		}
	}
	due := clock.now().Add(time.Minute)
	raise := func(agent, id, watched, task string) expect.Instant {
		t.Helper()
		recs, err := svc.Raise(ctx, agent, expect.RaiseRequest{TaskID: "t", ContextID: "c", Expectations: []expect.Expectation{
			paymentExpectation(id, due, func(e *expect.Expectation) { e.WatchTask = &expect.WatchTask{AgentID: watched, TaskID: task} })}})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := expect.NextInstant(recs[0])
		return in
	}
	// Same id, two agents, two answers.
	tr := &taskAnswers{svc: svc, states: map[string]expect.RemoteTask{"t-done": {State: "completed"}, "t-failed": {State: "failed"}}}
	svc.SetTaskReader(tr)
	ins := []expect.Instant{raise("agent-1", "e1", "agent-2", "t-done"), raise("agent-b", "e1", "agent-2", "t-failed")}
	clock.add(time.Minute + time.Second)
	if _, err := svc.TickDue(ctx, ins); err != nil {
		t.Fatal(err)
	}
	if r, _ := svc.Get(ctx, "agent-1", "e1"); r.State != expect.StateSatisfied {
		t.Fatalf("agent-1's e1 (its task completed): %s", r.State)
	}
	if r, _ := svc.Get(ctx, "agent-b", "e1"); r.State != expect.StateLapsed || r.Lapse.Lapse != expect.Refuted {
		t.Fatalf("agent-b's e1 (its task failed): %s %+v", r.State, r.Lapse)
	}

	// An agent that never answers.
	slow := &blockingReader{}
	svc.SetTaskReader(slow)
	svc.askLimits = &[2]time.Duration{100 * time.Millisecond, 200 * time.Millisecond}
	due = clock.now().Add(time.Minute)
	var first, second []expect.Instant
	for i := range 6 {
		first = append(first, raise("agent-1", fmt.Sprintf("s%d", i), "agent-slow", "t"))
		second = append(second, raise("agent-1", fmt.Sprintf("s%d-again", i), "agent-slow", "t"))
	}
	clock.add(time.Minute + time.Second)
	if _, err := svc.TickDue(ctx, first); err != nil {
		t.Fatal(err)
	}
	if slow.asked == 0 || slow.asked > askPerAgent*2 {
		t.Fatalf("the silent agent was asked %d times, want between 1 and %d (at most %d at once, within the budget)", slow.asked, askPerAgent*2, askPerAgent)
	}
	asked := slow.asked
	if _, err := svc.TickDue(ctx, second); err != nil {
		t.Fatal(err)
	}
	if slow.asked != asked {
		t.Fatalf("the silent agent was asked again (%d → %d) within its backoff", asked, slow.asked)
	}
	for _, in := range append(first, second...) {
		if r, _ := svc.Get(ctx, "agent-1", in.ExpectationID); r.State != expect.StateLapsed || r.Lapse.Lapse != expect.Overdue {
			t.Fatalf("%s: %s, want lapsed overdue", in.ExpectationID, r.State)
		}
	}
}
