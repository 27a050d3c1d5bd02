package app

import (
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/heartbeat"
)

// scenarioHeartbeats: a heartbeat every 3 s with 1 s of grace is pinged
// (by a cron job's token, no body), then goes silent: an overdue lapse
// task reaches the agent within 5 s and its status is down; a ping brings
// it up with the next period; /ping/fail lapses the period "refuted" with
// its own lapse task; another tenant can neither read nor ping it.
func scenarioHeartbeats(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	base := "/v1/agents/" + agentID + "/heartbeats/nightly-sync"
	var hb heartbeat.View
	e.must(201, e.call("PUT", base, map[string]any{"kind": "payment", "every": "PT3S", "grace": "PT1S"})).json(t, &hb)
	if hb.Status != heartbeat.StatusNew || hb.Subject.ID != "nightly-sync" {
		t.Fatalf("put: %+v", hb)
	}
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agentID+"/heartbeats/bad", map[string]any{"kind": "payment", "cron": "0 9 * * *", "timezone": "Mars/Olympus"})), "timezone")
	e.must(403, e.call("GET", base, nil, tenantB))
	e.must(403, e.call("POST", base+"/ping", nil, tenantB))

	e.must(200, e.call("POST", base+"/ping", nil, factsToken)).json(t, &hb)
	if hb.Status != heartbeat.StatusUp || hb.ExpectationID != "hb:nightly-sync:1" || hb.NextDueAt == "" {
		t.Fatalf("after a ping: %+v", hb)
	}
	pinged := time.Now()
	rec := e.waitRecord(agentID, "hb:nightly-sync:1", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	msgs := ag.WaitFor(1, 10*time.Second)
	if since := time.Since(pinged); since > 5*time.Second+time.Second {
		t.Errorf("the lapse task arrived %s after the ping (due 3 s, grace 1 s)", since)
	}
	checkLapseMessage(t, msgs[0], rec, expect.Overdue)
	e.must(200, e.call("GET", base, nil)).json(t, &hb)
	if hb.Status != heartbeat.StatusDown {
		t.Fatalf("after the silence: %+v", hb)
	}
	e.must(200, e.call("POST", base+"/ping", nil, factsToken)).json(t, &hb)
	if hb.Status != heartbeat.StatusUp || hb.ExpectationID != "hb:nightly-sync:2" {
		t.Fatalf("after the recovering ping: %+v", hb)
	}
	if r := e.record(agentID, "hb:nightly-sync:1"); r.SatisfiedBy == nil || r.SatisfiedBy.Source != "reporter-7" {
		t.Fatalf("period 1 did not record the late ping: %+v", r)
	}
	e.must(200, e.call("POST", base+"/ping/fail", nil, factsToken)).json(t, &hb)
	if hb.Status != heartbeat.StatusDown {
		t.Fatalf("after fail: %+v", hb)
	}
	rec = e.waitRecord(agentID, "hb:nightly-sync:2", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	msgs = ag.WaitFor(2, 10*time.Second)
	checkLapseMessage(t, msgs[1], rec, expect.Refuted)
	// Listed, paused (no period open), deleted.
	var list struct{ Heartbeats []heartbeat.View }
	e.must(200, e.call("GET", "/v1/agents/"+agentID+"/heartbeats", nil, readerToken)).json(t, &list)
	if len(list.Heartbeats) != 1 || list.Heartbeats[0].Status != heartbeat.StatusDown {
		t.Fatalf("list: %+v", list)
	}
	e.must(200, e.call("POST", base+"/pause", nil)).json(t, &hb)
	if hb.Status != heartbeat.StatusPaused {
		t.Fatalf("pause: %+v", hb)
	}
	e.must(204, e.call("DELETE", base, nil))
	e.must(404, e.call("GET", base, nil))
	e.must(404, e.call("POST", base+"/ping", nil))
}

// scenarioFactsBeforeTheRaiseAndRefuting: a fact sent 1 s before a raise
// satisfies the expectation raised with lookback and not the one raised
// without; a refuting fact lapses an open expectation "refuted", whose
// lapse task carries the fact.
func scenarioFactsBeforeTheRaiseAndRefuting(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{
		fact("invoice.42.early", ts(-time.Second)), fact("invoice.42.without", ts(-time.Second))}}))
	time.Sleep(time.Second)
	var out struct{ Records []expect.Record }
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("early", ts(time.Hour), func(m map[string]any) {
			m["satisfiedBy"] = map[string]any{"factKey": "invoice.42.early", "lookback": "PT1M"}
		}),
		payment("without", ts(time.Hour)),
		payment("declinable", ts(time.Hour), func(m map[string]any) { m["refutedBy"] = map[string]any{"factKey": "invoice.42.declined"} }),
	))).json(t, &out)
	if out.Records[0].State != expect.StateSatisfied || out.Records[0].SatisfiedBy.Source != "admin" || out.Records[1].State != expect.StateOpen {
		t.Fatalf("raised: %+v", out.Records)
	}
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("too-far", ts(time.Hour), func(m map[string]any) { m["satisfiedBy"] = map[string]any{"factKey": "k", "lookback": "P30D"} })))),
		"expectations[0].satisfiedBy.lookback")
	var facts struct {
		Facts []struct{ Refuted []string }
	}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.declined", ts(0))}}, factsToken)).json(t, &facts)
	if len(facts.Facts) != 1 || len(facts.Facts[0].Refuted) != 1 || facts.Facts[0].Refuted[0] != "declinable" {
		t.Fatalf("refuting fact: %+v", facts)
	}
	rec := e.waitRecord(agentID, "declinable", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	msgs := ag.WaitFor(1, 10*time.Second)
	checkLapseMessage(t, msgs[0], rec, expect.Refuted)
	l := msgs[0].Metadata[expect.URI].(map[string]any)["lapse"].(map[string]any)
	if rb, _ := l["refutedBy"].(map[string]any); rb["factKey"] != "invoice.42.declined" || rb["source"] != "reporter-7" {
		t.Fatalf("the lapse task does not carry the refuting fact: %v", l)
	}
	if text := msgs[0].Text; !strings.Contains(text, "refuted") {
		t.Errorf("the lapse task's text does not say it was refuted: %q", text)
	}
}

// scenarioWatchedTasks: expectations wait on another registered agent's
// A2A task (watchTask): at the due instant the watcher asks that agent
// (an SDK agent of each version), and the task completed satisfies one,
// failed refutes one (its lapse task follows), still running lets one
// lapse overdue; a token that may not act for the watched agent cannot
// watch it, and an unregistered agent is named as such.
func scenarioWatchedTasks(t *testing.T) {
	for _, v := range []string{"1.0", "0.3"} {
		t.Run("A2A "+v, func(t *testing.T) {
			e := startEnv(t)
			ag := register(t, e, v)
			remote := a2atest.NewAgent(t, v)
			e.must(200, e.call("PUT", "/v1/agents/agent-remote", remote.Card()))
			done, failed, running := remote.StartTask(t), remote.StartTask(t), remote.StartTask(t)
			watch := func(id, task string, mut ...func(map[string]any)) map[string]any {
				return payment(id, ts(1500*time.Millisecond), append([]func(map[string]any){func(m map[string]any) {
					m["watchTask"] = map[string]any{"agentId": "agent-remote", "taskId": task}
				}}, mut...)...)
			}
			hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
				payment("nobody", ts(time.Hour), func(m map[string]any) { m["watchTask"] = map[string]any{"agentId": "agent-nobody", "taskId": "t"} })))),
				"expectations[0].watchTask.agentId")
			e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
				watch("w-done", done), watch("w-failed", failed, func(m map[string]any) { m["refutedBy"] = map[string]any{"factKey": "remote.failed"} }), watch("w-running", running))))
			remote.FinishTask(t, done, "complete")
			remote.FinishTask(t, failed, "fail")
			sat := e.waitRecord(agentID, "w-done", func(r *expect.Record) bool { return r.State != expect.StateOpen })
			if sat.State != expect.StateSatisfied || sat.SatisfiedBy.Source != "a2a-task:agent-remote/"+done || sat.Late {
				t.Fatalf("the completed task's expectation: %+v (fact %+v)", sat, sat.SatisfiedBy)
			}
			ref := e.waitRecord(agentID, "w-failed", func(r *expect.Record) bool { return r.LapseTaskID != "" })
			if ref.Lapse.Lapse != expect.Refuted || ref.Lapse.RefutedBy.FactKey != "remote.failed" {
				t.Fatalf("the failed task's expectation: %+v", ref.Lapse)
			}
			over := e.waitRecord(agentID, "w-running", func(r *expect.Record) bool { return r.LapseTaskID != "" })
			if over.Lapse.Lapse != expect.Overdue {
				t.Fatalf("the running task's expectation: %+v", over.Lapse)
			}
			if n := len(ag.WaitFor(2, 10*time.Second)); n != 2 {
				t.Fatalf("the agent received %d lapse tasks, want 2", n)
			}
		})
	}
}

// scenarioWatchedTasksTenancy: a tenant cannot watch the tasks of an agent
// it may not act for (403 naming the field), through the route, the MCP
// tool or an A2A push.
func scenarioWatchedTasksTenancy(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	registerAs(t, e, "agent-b")
	body := raiseBody(payment("spy", ts(time.Hour), func(m map[string]any) {
		m["watchTask"] = map[string]any{"agentId": agentID, "taskId": "their-task"}
	}))
	hasErrorPath(t, e.must(403, e.call("POST", "/v1/agents/agent-b/expectations", body, tenantB)), "expectations[0].watchTask.agentId")
}
