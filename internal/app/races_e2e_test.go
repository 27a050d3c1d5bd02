package app

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

// The race scenarios: a decision taken right after the commit it depends
// on. On DynamoDB a decision read from a GSI could miss that commit; in the
// AWS mode the emulator's GSIs lag (dynamotest.DefaultFaults), so these
// fail there if any decision reads a GSI.

// scenarioRaceFactRightAfterRaise: a fact reported 0-50 ms after the raise
// it satisfies is never lost.
func scenarioRaceFactRightAfterRaise(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	for i := 0; i < 8; i++ {
		id := fmt.Sprintf("race-fact-%d", i)
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment(id, ts(time.Hour), func(m map[string]any) { m["grace"] = "PT1H" }))))
		time.Sleep(time.Duration(rand.IntN(51)) * time.Millisecond)
		var out struct {
			Facts []struct {
				FactKey   string
				Satisfied []string
			}
		}
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42."+id, ts(0))}})).json(t, &out)
		if len(out.Facts) != 1 || len(out.Facts[0].Satisfied) != 1 || out.Facts[0].Satisfied[0] != id {
			t.Fatalf("fact right after the raise of %s satisfied %+v", id, out.Facts)
		}
		if r := e.record(agentID, id); r.State != expect.StateSatisfied {
			t.Fatalf("%s: %s, want satisfied", id, r.State)
		}
	}
}

// scenarioRaceAnchorSatisfiedWhileDependentRaised: whichever commits
// first, the dependent ends up due at the anchor's fact plus its offset.
func scenarioRaceAnchorSatisfiedWhileDependentRaised(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	projected := ts(48 * time.Hour)
	for i := 0; i < 6; i++ {
		anchor, dep := fmt.Sprintf("anchor-%d", i), fmt.Sprintf("dependent-%d", i)
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment(anchor, ts(time.Hour)))))
		observed := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
		var wg sync.WaitGroup
		var raised, reported resp
		wg.Add(2)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			raised = e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment(dep, projected, func(m map[string]any) {
				m["anchor"] = map[string]any{"expectationId": anchor, "offset": "PT2H"}
			})))
		}()
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			reported = e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42."+anchor, expect.FormatTime(observed))}})
		}()
		wg.Wait()
		e.must(200, raised)
		e.must(200, reported)
		want := expect.FormatTime(observed.Add(2 * time.Hour))
		d := e.waitRecord(agentID, dep, func(r *expect.Record) bool { return r.DueAt == want })
		if d.ProjectedDueAt != projected || d.State != expect.StateOpen {
			t.Fatalf("%s: %+v", dep, d)
		}
	}
}

// scenarioRaceTaskCanceledRightAfterRaise: a task canceled right after it
// raised withdraws what it raised.
func scenarioRaceTaskCanceledRightAfterRaise(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	for i := 0; i < 6; i++ {
		task := fmt.Sprintf("task-race-%d", i)
		body := raiseBody(payment(task+"-a", ts(time.Hour)), payment(task+"-b", ts(time.Hour)))
		body["taskId"] = task
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", body))
		cancel := map[string]any{"statusUpdate": map[string]any{"taskId": task, "contextId": "ctx-1", "status": map[string]any{"state": "TASK_STATE_CANCELED"}}}
		var res struct{ Canceled []expect.Record }
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/a2a", cancel)).json(t, &res)
		if len(res.Canceled) != 2 {
			t.Fatalf("%s canceled right after raising withdrew %d of 2", task, len(res.Canceled))
		}
		for _, id := range []string{task + "-a", task + "-b"} {
			if r := e.record(agentID, id); r.State != expect.StateWithdrawn {
				t.Fatalf("%s: %s, want withdrawn", id, r.State)
			}
		}
	}
}

// scenarioRaceFirstEventRightAfterAnticipate: the first event right after
// the ANTICIPATE finds and seals it; it cannot change afterwards.
func scenarioRaceFirstEventRightAfterAnticipate(t *testing.T) {
	e := startEnv(t)
	for i := 0; i < 5; i++ {
		ant, plan := fmt.Sprintf("ant-race-%d", i), fmt.Sprintf("plan-race-%d", i)
		e.must(201, e.call("POST", "/v1/anticipations", variant(t, ant, plan)))
		e.must(202, e.call("POST", "/v1/executions/"+plan+"/events", event(plan+"-e0", "TOOL_REQUEST", "tool", "iam_create_user", "arguments", map[string]any{"username": "alice"})))
		var got struct{ Sealed bool }
		e.must(200, e.call("GET", "/v1/anticipations/"+ant, nil)).json(t, &got)
		if !got.Sealed {
			t.Fatalf("%s not sealed by the first event of %s", ant, plan)
		}
		e.must(409, e.call("PUT", "/v1/anticipations/"+ant, variant(t, ant, plan, func(m map[string]any) { m["timestamp"] = "2026-06-24T11:00:00Z" })))
	}
	// Declared concurrently with the first event: either it is sealed by
	// it, or its declaration is refused because the plan has begun.
	for i := 0; i < 5; i++ {
		ant, plan := fmt.Sprintf("ant-race-c-%d", i), fmt.Sprintf("plan-race-c-%d", i)
		e.must(201, e.call("POST", "/v1/anticipations", variant(t, ant+"-first", plan)))
		var wg sync.WaitGroup
		var declared, began resp
		body := variant(t, ant, plan)
		wg.Add(2)
		go func() {
			defer wg.Done()
			declared = e.call("POST", "/v1/anticipations", body)
		}()
		go func() {
			defer wg.Done()
			began = e.call("POST", "/v1/executions/"+plan+"/events", event(plan+"-e0", "TOOL_REQUEST", "tool", "iam_create_user", "arguments", map[string]any{"username": "alice"}))
		}()
		wg.Wait()
		e.must(202, began)
		switch declared.status {
		case 201:
			var got struct{ Sealed bool }
			e.must(200, e.call("GET", "/v1/anticipations/"+ant, nil)).json(t, &got)
			if !got.Sealed {
				t.Fatalf("%s declared before %s began but left unsealed after it began", ant, plan)
			}
		case 409:
		default:
			t.Fatalf("declaration racing the first event: %d %s", declared.status, declared.body)
		}
	}
}

// scenarioRaceWithdrawVersusLapse: a withdrawal at the instant of a lapse
// either wins (withdrawn, no lapse task) or loses (409, lapsed, one task).
func scenarioRaceWithdrawVersusLapse(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	wonWithdraw, wonLapse := 0, 0
	for i := 0; i < 6; i++ {
		id := fmt.Sprintf("race-withdraw-%d", i)
		due := time.Now().Add(1200 * time.Millisecond)
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment(id, expect.FormatTime(due)))))
		// Around the instant (the Scheduler's resolution is a second).
		time.Sleep(time.Until(due) + time.Duration(rand.IntN(1200))*time.Millisecond - 200*time.Millisecond)
		r := e.call("POST", "/v1/agents/"+agentID+"/withdrawals", map[string]any{"withdraw": []string{id}})
		switch r.status {
		case 200:
			wonWithdraw++
			time.Sleep(2500 * time.Millisecond) // past the instant and its schedule
			if rec := e.record(agentID, id); rec.State != expect.StateWithdrawn || rec.Lapse != nil {
				t.Fatalf("%s withdrawn, then: %+v", id, rec)
			}
		case 409:
			wonLapse++
			rec := e.waitRecord(agentID, id, func(r *expect.Record) bool { return r.LapseTaskID != "" })
			if rec.State != expect.StateLapsed {
				t.Fatalf("%s lapsed, then: %+v", id, rec)
			}
		default:
			t.Fatalf("withdraw racing the lapse of %s: %d %s", id, r.status, r.body)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if n := len(ag.Received()); n != wonLapse {
		t.Fatalf("agent received %d lapse tasks, want %d (one per lapse that won; withdrawals won %d)", n, wonLapse, wonWithdraw)
	}
	t.Logf("withdraw won %d, lapse won %d", wonWithdraw, wonLapse)
}
