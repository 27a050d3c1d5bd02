package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/awsops"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/heartbeat"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/watcher"
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

// heldTasks is an A2A agent whose tasks a test starts and ends: the Go
// SDK's (a2atest) or the Python SDK's (pythonAgent).
type heldTasks interface {
	Card(extraSkills ...string) []byte
	StartTask(t testing.TB) string
	FinishTask(t testing.TB, taskID, outcome string)
}

// heldTaskAgents are the SDK agents whose tasks the watched-task
// scenarios watch.
var heldTaskAgents = []struct {
	name string
	make func(t *testing.T) heldTasks
}{
	{"Go SDK 1.0", func(t *testing.T) heldTasks { return a2atest.NewAgent(t, "1.0") }},
	{"Go SDK 0.3", func(t *testing.T) heldTasks { return a2atest.NewAgent(t, "0.3") }},
	{"Python SDK 0.3", func(t *testing.T) heldTasks { return startPythonAgent(t) }},
}

// scenarioWatchedTasks: expectations wait on another registered agent's
// A2A task (watchTask): at the due instant the watcher asks that agent (an
// SDK agent: Go 1.0, Go 0.3, the official Python SDK 0.3), and the task
// completed satisfies one, failed refutes one (its lapse task follows),
// still running lets one lapse overdue; an unregistered agent is named
// as such.
func scenarioWatchedTasks(t *testing.T) {
	for _, rm := range heldTaskAgents {
		t.Run(rm.name, func(t *testing.T) {
			e := startEnv(t)
			ag := register(t, e, "1.0")
			remote := rm.make(t)
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

// pythonAgent is testdata's agent03.py, an agent on the official A2A
// Python SDK 0.3 served by uvicorn.
type pythonAgent struct {
	url  string
	card []byte
	seq  int
}

// startPythonAgent starts agent03.py (in the A2A Python SDK's cached
// virtualenv) and stops it when the test ends. Unavailable, the test is
// skipped, and fails under CI=true.
func startPythonAgent(t *testing.T) *pythonAgent {
	t.Helper()
	dir := "../httpapi/testdata/a2a-python"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	venv := exec.CommandContext(ctx, "bash", dir+"/venv.sh", "python")
	venv.Stderr = &stderr
	out, err := venv.Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("A2A Python SDK unavailable (CI=true, so this fails instead of skipping): %v: %s", err, stderr.String())
		}
		t.Skipf("A2A Python SDK unavailable: %v: %s", err, stderr.String())
	}
	cmd := exec.Command(strings.TrimSpace(string(out)), dir+"/agent03.py")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
				lines <- u
			}
		}
	}()
	p := &pythonAgent{}
	select {
	case p.url = <-lines:
	case <-time.After(60 * time.Second):
		t.Fatal("agent03.py did not say where it listens")
	}
	// Its card for clockwork: the Go test agent's 0.3 card (the extension
	// declaration, the lapse skill), pointing at the Python agent.
	goCard := a2atest.NewAgent(t, "0.3")
	p.card = bytes.ReplaceAll(goCard.Card(), []byte(goCard.URL()), []byte(p.url))
	return p
}

func (p *pythonAgent) Card(...string) []byte { return p.card }

func (p *pythonAgent) StartTask(t testing.TB) string { return p.message(t, "", "hold") }

func (p *pythonAgent) FinishTask(t testing.TB, taskID, outcome string) {
	t.Helper()
	if got := p.message(t, taskID, outcome); got != taskID {
		t.Fatalf("finishing task %s answered task %q", taskID, got)
	}
}

// message sends one 0.3 message/send and returns the answer's task id.
func (p *pythonAgent) message(t testing.TB, taskID, text string) string {
	t.Helper()
	p.seq++
	msg := map[string]any{"kind": "message", "messageId": fmt.Sprintf("py-%d", p.seq), "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
	if taskID != "" {
		msg["taskId"] = taskID
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": p.seq, "method": "message/send", "params": map[string]any{"message": msg}})
	res, err := http.Post(p.url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var rr struct {
		Result struct {
			ID string `json:"id"`
		} `json:"result"`
	}
	raw, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(raw, &rr); err != nil || rr.Result.ID == "" {
		t.Fatalf("the Python agent answered %d %s", res.StatusCode, raw)
	}
	return rr.Result.ID
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

// scenarioWatchedTasksPushed: with a public URL, the watcher subscribes to
// each watched task (an A2A push notification config on the task's agent:
// Go SDK 1.0 and 0.3, the official Python SDK 0.3), and the agent's push
// decides the expectation at once: hours before its due time, a completed
// task satisfies one and a failed task refutes another. A push with a
// wrong token changes nothing and answers as an unknown subscription does.
func scenarioWatchedTasksPushed(t *testing.T) {
	for _, rm := range heldTaskAgents {
		t.Run(rm.name, func(t *testing.T) {
			e := newEnv(t)
			e.public = true
			e.restart()
			t.Cleanup(e.stop)
			register(t, e, "1.0")
			remote := rm.make(t)
			e.must(200, e.call("PUT", "/v1/agents/agent-remote", remote.Card()))
			done, failed := remote.StartTask(t), remote.StartTask(t)
			watch := func(id, task string) map[string]any {
				return payment(id, ts(3*time.Hour), func(m map[string]any) {
					m["watchTask"] = map[string]any{"agentId": "agent-remote", "taskId": task}
				})
			}
			e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(watch("p-done", done), watch("p-failed", failed))))
			// The subscriptions are made from the change feed: wait for both.
			e.waitSubscribed(agentID, "p-done", "p-failed")
			remote.FinishTask(t, done, "complete")
			remote.FinishTask(t, failed, "fail")
			sat := e.waitRecord(agentID, "p-done", func(r *expect.Record) bool { return r.State != expect.StateOpen })
			if sat.State != expect.StateSatisfied || sat.SatisfiedBy.Source != "a2a-task:agent-remote/"+done {
				t.Fatalf("the completed task's expectation: %+v (fact %+v)", sat, sat.SatisfiedBy)
			}
			ref := e.waitRecord(agentID, "p-failed", func(r *expect.Record) bool { return r.State != expect.StateOpen })
			if ref.State != expect.StateLapsed || ref.Lapse.Lapse != expect.Refuted {
				t.Fatalf("the failed task's expectation: %+v", ref.Lapse)
			}
			push := map[string]any{"task": map[string]any{"id": done, "status": map[string]any{"state": "TASK_STATE_FAILED"}}}
			wrong := e.call("POST", "/v1/watches/"+agentID+"/p-done", push, "not-the-token")
			unknown := e.call("POST", "/v1/watches/"+agentID+"/p-none", push, "not-the-token")
			if wrong.status != 404 || unknown.status != 404 || string(wrong.body) != strings.ReplaceAll(string(unknown.body), "p-none", "p-done") {
				t.Fatalf("a wrong token answers %d %s; an unknown subscription %d %s", wrong.status, wrong.body, unknown.status, unknown.body)
			}
		})
	}
}

// waitSubscribed waits until the watcher has stored the subscriptions of
// the expectations ids of agent.
func (e *testEnv) waitSubscribed(agent string, ids ...string) {
	e.t.Helper()
	st := e.store()
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			// The test's own read, not a function's (awsops).
			_, err := st.Get(awsops.WithFunction(context.Background(), awsops.TestHarness), watcher.WatchKey(agent, id))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("no subscription for %s/%s: %v", agent, id, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// store is the runtime's store, either runtime.
func (e *testEnv) store() store.Store {
	if e.aws {
		return e.rt.Store
	}
	return e.app.Store
}
