package app

// Scenarios of lapse task delivery: retries, dead letters and replay,
// agents that keep their own time, restarts, the outbound guard and an
// unkind clock.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/expect"
)

func scenarioDeliveryRetriesDeadLetterAndReplay(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	ag.FailNext(2, 503)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("flaky", ts(100*time.Millisecond)))))
	rec := e.waitRecord(agentID, "flaky", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	if rec.Delivery.Attempts != 3 {
		t.Fatalf("attempts %d, want 3 (two failures, one success)", rec.Delivery.Attempts)
	}
	got := ag.WaitFor(1, 10*time.Second)
	checkLapseMessage(t, deliveredMessage(got, rec), rec, expect.Overdue)

	ag.FailNext(1000, 500)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("down", ts(100*time.Millisecond)))))
	dead := e.waitRecord(agentID, "down", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeadLettered })
	if dead.Delivery.Attempts != 4 || dead.LapseTaskID != "" || dead.Delivery.LastError == "" {
		t.Fatalf("dead letter: %+v", dead.Delivery)
	}
	var dl struct{ Records []expect.Record }
	dl.Records = e.listing("/v1/deadletters", func(rs []expect.Record) bool { return len(rs) > 0 })
	if len(dl.Records) != 1 || dl.Records[0].Expectation.ExpectationID != "down" {
		t.Fatalf("dead letters: %+v", dl.Records)
	}
	e.must(200, e.call("GET", "/v1/deadletters", nil, otherToken)).json(t, &dl)
	if len(dl.Records) != 0 {
		t.Fatal("dead letters of other agents are hidden")
	}
	ag.FailNext(0, 0)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations/down/redeliver", nil))
	replayed := e.waitRecord(agentID, "down", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	if replayed.Delivery.MessageID != dead.Delivery.MessageID {
		t.Fatal("replay changed the messageId")
	}
	e.must(200, e.call("GET", "/v1/deadletters", nil)).json(t, &dl)
	if len(dl.Records) != 0 {
		t.Fatalf("replayed letter still dead: %+v", dl.Records)
	}
	ids := map[string]bool{}
	for _, m := range ag.Received() {
		ids[m.MessageID] = true
	}
	if len(ids) != 2 {
		t.Fatalf("the agent saw %d distinct messageIds for 2 lapses", len(ids))
	}
}

func scenarioKeepsTimeAgentsAreNotSent(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0", func(card map[string]any) {
		exts := card["capabilities"].(map[string]any)["extensions"].([]any)
		for _, x := range exts {
			m := x.(map[string]any)
			if m["uri"] == expect.URI {
				m["params"].(map[string]any)["keepsTime"] = true
			}
		}
	})
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("self", ts(100*time.Millisecond)))))
	rec := e.waitRecord(agentID, "self", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.Suppressed })
	if rec.State != expect.StateLapsed || rec.Lapse == nil {
		t.Fatalf("lapse still recorded: %+v", rec)
	}
	if n := len(ag.Received()); n != 0 {
		t.Fatalf("keepsTime agent received %d tasks", n)
	}
}

func scenarioRestartFiresMissedInstantsAndDeliversOnce(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("while-down", ts(1500*time.Millisecond)))))
	e.stop()
	time.Sleep(2500 * time.Millisecond)
	if n := len(ag.Received()); n != 0 {
		t.Fatalf("delivered while down: %d", n)
	}
	e.restart()
	rec := e.waitRecord(agentID, "while-down", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	checkLapseMessage(t, ag.WaitFor(1, 10*time.Second)[0], rec, expect.Overdue)
	e.stop()
	e.restart()
	time.Sleep(300 * time.Millisecond)
	if n := len(ag.Received()); n != 1 {
		t.Fatalf("a delivered lapse was sent again after restart: %d", n)
	}
}

// scenarioOutboundGuardRefusesLoopbackAgents starts the runtime with the
// outbound guard on (as the Lambda functions run): a lapse for an agent on
// loopback is refused, recorded and dead-lettered, never sent.
func scenarioOutboundGuardRefusesLoopbackAgents(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.AllowPrivateAgents = false })
	ag := register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("guarded", ts(100*time.Millisecond)))))
	rec := e.waitRecord(agentID, "guarded", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeadLettered })
	if rec.LapseTaskID != "" || rec.Delivery.Attempts != 1 || !strings.Contains(rec.Delivery.LastError, "refused") {
		t.Fatalf("refused delivery must be recorded once and dead-lettered: %+v", rec.Delivery)
	}
	dl := struct{ Records []expect.Record }{e.listing("/v1/deadletters", func(rs []expect.Record) bool { return len(rs) > 0 })}
	if len(dl.Records) != 1 {
		t.Fatalf("dead letters: %+v", dl.Records)
	}
	if n := ag.Requests(); n != 0 {
		t.Fatalf("the guard let %d requests reach a loopback agent", n)
	}
}

// scenarioInstantsSurviveAnUnkindClock raises expectations whose instants
// fall 6 to 10 s ahead (far enough for the AWS mode to give them schedules,
// which its emulated Scheduler fires early, late, twice or never) and some
// nearer (straight on the timer queue there), with and without grace and
// horizon: each lapses, never before its instant, and its agent gets one
// lapse task per lapse (duplicates carry the same messageId).
func scenarioInstantsSurviveAnUnkindClock(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	type want struct {
		kind expect.LapseKind
		at   time.Time
	}
	wants := map[string]want{}
	var list []map[string]any
	start := time.Now()
	for i := range 12 {
		id := fmt.Sprintf("unkind-%02d", i)
		due := start.Add(time.Duration(1000+750*i) * time.Millisecond)
		m := payment(id, expect.FormatTime(due))
		w := want{expect.Overdue, due}
		switch i % 3 {
		case 1:
			m["grace"] = "PT1.5S"
			w.at = due.Add(1500 * time.Millisecond)
		case 2:
			h := due.Add(-500 * time.Millisecond)
			m["grace"], m["horizon"] = "PT1H", expect.FormatTime(h)
			w = want{expect.Stalled, h}
		}
		wants[id] = w
		list = append(list, m)
	}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(list...)))
	for id, w := range wants {
		rec := e.waitRecord(agentID, id, func(r *expect.Record) bool { return r.State != expect.StateOpen && r.LapseTaskID != "" })
		if rec.State != expect.StateLapsed || rec.Lapse.Lapse != w.kind {
			t.Fatalf("%s: %s %+v, want lapsed %s", id, rec.State, rec.Lapse, w.kind)
		}
		at, err := expect.ParseTime(rec.Lapse.LapsedAt)
		if err != nil {
			t.Fatal(err)
		}
		if at.Before(w.at) {
			t.Errorf("%s lapsed at %s, before its instant %s", id, rec.Lapse.LapsedAt, expect.FormatTime(w.at))
		}
	}
	ids := map[string]bool{}
	for _, r := range ag.Received() {
		ids[r.MessageID] = true
	}
	if len(ids) != len(wants) {
		t.Errorf("%d distinct lapse messageIds, want %d (one per lapse)", len(ids), len(wants))
	}
}
