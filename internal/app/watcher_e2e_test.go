package app

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/expect"
)

const agentID = "agent-1"

// register starts a real A2A agent (SDK server) of the given protocol
// version and registers its card for agentID.
func register(t *testing.T, e *testEnv, version string, mut ...func(map[string]any)) *a2atest.Agent {
	t.Helper()
	ag := a2atest.NewAgent(t, version)
	card := ag.Card()
	if len(mut) > 0 {
		var m map[string]any
		if err := json.Unmarshal(card, &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range mut {
			f(m)
		}
		card, _ = json.Marshal(m)
	}
	e.must(200, e.call("PUT", "/v1/agents/"+agentID, card))
	return ag
}

func payment(id string, due string, mut ...func(map[string]any)) map[string]any {
	m := map[string]any{
		"expectationId": id, "kind": "payment",
		"subject": map[string]any{"type": "invoice", "id": "42"},
		"expects": "invoice 42 is paid", "satisfiedBy": map[string]any{"factKey": "invoice.42." + id},
		"dueAt": due, "basis": "contract",
	}
	for _, f := range mut {
		f(m)
	}
	return m
}

func raiseBody(es ...map[string]any) map[string]any {
	return map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": es}
}

func fact(key, observed string) map[string]any {
	return map[string]any{"factKey": key, "observedAt": observed, "source": "forged-source"}
}

func scenarioCardsAndAuth(t *testing.T) {
	e := startEnv(t)
	ag := a2atest.NewAgent(t, "1.0")
	e.must(401, e.call("PUT", "/v1/agents/"+agentID, ag.Card(), ""))
	e.must(401, e.call("PUT", "/v1/agents/"+agentID, ag.Card(), "wrong"))
	problem(t, e.must(403, e.call("PUT", "/v1/agents/"+agentID, ag.Card(), readerToken)))
	problem(t, e.must(403, e.call("PUT", "/v1/agents/"+agentID, ag.Card(), otherToken)))
	problem(t, e.must(404, e.call("GET", "/v1/agents/"+agentID, nil)))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID, ag.Card()))
	e.must(200, e.call("GET", "/v1/agents/"+agentID, nil, readerToken))
	e.must(403, e.call("GET", "/v1/agents/"+agentID, nil, otherToken))
	// A card without the declaration is refused with the failing path.
	r := e.must(400, e.call("PUT", "/v1/agents/bad", `{"name":"x","supportedInterfaces":[{"url":"http://127.0.0.1:1","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{},"skills":[]}`))
	problem(t, r)
	// Scopes per route.
	e.must(403, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("e1", ts(time.Hour))), factsToken))
	e.must(403, e.call("POST", "/v1/agents/"+agentID+"/withdrawals", map[string]any{"withdraw": []string{"e1"}}, factsToken))
	e.must(403, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("k", ts(0))}}, readerToken))
	e.must(401, e.call("GET", "/v1/agents/"+agentID+"/expectations", nil, ""))
}

func scenarioRaiseIdempotentConflictAndAllOrNothing(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	body := raiseBody(payment("e1", ts(time.Hour)))
	var first, again struct{ Records []expect.Record }
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", body)).json(t, &first)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", body)).json(t, &again)
	if first.Records[0].RaisedAt != again.Records[0].RaisedAt || again.Records[0].State != expect.StateOpen {
		t.Fatalf("retry must return the same record: %+v vs %+v", first.Records[0], again.Records[0])
	}
	rec := first.Records[0]
	if rec.AgentID != agentID || rec.TaskID != "task-1" || rec.ContextID != "ctx-1" || rec.Lineage != 0 || rec.ProjectedDueAt != rec.DueAt {
		t.Fatalf("record fields: %+v", rec)
	}
	changed := raiseBody(payment("e1", ts(2*time.Hour)))
	problem(t, e.must(409, e.call("POST", "/v1/agents/"+agentID+"/expectations", changed)))
	// Withdrawn ids stay taken.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/withdrawals", map[string]any{"withdraw": []string{"e1"}}))
	e.must(409, e.call("POST", "/v1/agents/"+agentID+"/expectations", changed))

	// A batch with one bad expectation raises none.
	bad := raiseBody(payment("ok-1", ts(time.Hour)), payment("ok-2", ts(time.Hour)), payment("bad", "not-a-time"))
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", bad)), "expectations[2].dueAt")
	for _, id := range []string{"ok-1", "ok-2", "bad"} {
		e.must(404, e.call("GET", "/v1/agents/"+agentID+"/expectations/"+id, nil))
	}
	for _, c := range []struct {
		name, path string
		mut        func(map[string]any)
	}{
		{"unknown kind", "expectations[0].kind", func(m map[string]any) { m["kind"] = "nope" }},
		{"bad duration", "expectations[0].grace", func(m map[string]any) { m["grace"] = "2h" }},
		{"unknown anchor", "expectations[0].anchor.expectationId", func(m map[string]any) {
			m["anchor"] = map[string]any{"expectationId": "ghost", "offset": "PT1H"}
		}},
		{"unknown after", "expectations[0].after[0]", func(m map[string]any) { m["after"] = []string{"ghost"} }},
		{"unknown field", "expectations.0.colour", func(m map[string]any) { m["colour"] = "red" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("x", ts(time.Hour), c.mut))))
			p := problem(t, r)
			if !strings.Contains(string(r.body), strings.Split(c.path, ".")[len(strings.Split(c.path, "."))-1]) {
				t.Fatalf("error does not name %s: %v", c.path, p)
			}
			e.must(404, e.call("GET", "/v1/agents/"+agentID+"/expectations/x", nil))
		})
	}
	// Wrong skill for a kind restricted to skills.
	ship := payment("s1", ts(time.Hour), func(m map[string]any) {
		m["kind"] = "shipment"
		m["subject"] = map[string]any{"type": "order", "id": "7"}
	})
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(ship))), "skill")
	okShip := raiseBody(ship)
	okShip["skill"] = "fulfil"
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", okShip))
	// Malformed and oversized bodies.
	problem(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", `{"taskId":`)))
	problem(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", `{"taskId":5}`)))
	big := `{"taskId":"` + strings.Repeat("x", 2<<20) + `"}`
	problem(t, e.must(413, e.call("POST", "/v1/agents/"+agentID+"/expectations", big)))
	deep := strings.Repeat("[", 100) + strings.Repeat("]", 100)
	problem(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/facts", deep)))
	// Unknown agent.
	problem(t, e.must(404, e.call("POST", "/v1/agents/nobody/expectations", raiseBody(payment("z", ts(time.Hour))))))

	// Listing.
	var list struct{ Records []expect.Record }
	e.must(200, e.call("GET", "/v1/agents/"+agentID+"/expectations?state=withdrawn", nil)).json(t, &list)
	if len(list.Records) != 1 || list.Records[0].Expectation.ExpectationID != "e1" {
		t.Fatalf("withdrawn listing: %+v", list.Records)
	}
	list.Records = e.listing("/v1/agents/"+agentID+"/expectations?subjectType=order&subjectId=7", func(rs []expect.Record) bool { return len(rs) > 0 })
	if len(list.Records) != 1 || list.Records[0].Expectation.ExpectationID != "s1" {
		t.Fatalf("subject listing: %+v", list.Records)
	}
	hasErrorPath(t, e.must(400, e.call("GET", "/v1/agents/"+agentID+"/expectations?state=bogus", nil)), "state")
	hasErrorPath(t, e.must(400, e.call("GET", "/v1/agents/"+agentID+"/expectations?nextToken=%25%25", nil)), "nextToken")
}

// deliveredMessage picks, among the messages an agent received, the one
// whose answer the record kept: delivery is at least once under one
// messageId (a timed-out attempt or a duplicated change may show the agent
// the lapse again, and each time it creates a task), so the record's
// lapseTaskId is the task of one of the messages with its messageId. Without
// such a message it returns the last one, which checkLapseMessage refuses.
func deliveredMessage(got []a2atest.Received, rec *expect.Record) a2atest.Received {
	for _, m := range got {
		if rec.Delivery != nil && m.MessageID == rec.Delivery.MessageID && m.TaskID == rec.LapseTaskID {
			return m
		}
	}
	return got[len(got)-1]
}

func checkLapseMessage(t *testing.T, got a2atest.Received, rec *expect.Record, kind expect.LapseKind) {
	t.Helper()
	if got.MessageID != expect.MessageID(rec.Expectation.ExpectationID, kind, rec.Lapse.DueAt) {
		t.Errorf("messageId %s is not derived from (expectationId, lapse, dueAt)", got.MessageID)
	}
	if got.ContextID != rec.ContextID {
		t.Errorf("contextId %q, want the origin's %q", got.ContextID, rec.ContextID)
	}
	if !slices.Equal(got.ReferenceTaskIDs, []string{rec.TaskID}) {
		t.Errorf("referenceTaskIds %v, want [%s]", got.ReferenceTaskIDs, rec.TaskID)
	}
	if !slices.Contains(got.Extensions, expect.URI) {
		t.Errorf("extensions %v lack the URI", got.Extensions)
	}
	if !strings.Contains(got.ExtensionHeader, expect.URI) {
		t.Errorf("A2A-Extensions header %q lacks the URI", got.ExtensionHeader)
	}
	md, _ := got.Metadata[expect.URI].(map[string]any)
	if md == nil {
		t.Fatalf("metadata lacks the extension block: %v", got.Metadata)
	}
	if md["skill"] != "handle-lapse" {
		t.Errorf("metadata skill %v", md["skill"])
	}
	l, _ := md["lapse"].(map[string]any)
	if l["lapse"] != string(kind) || l["expectationId"] != rec.Expectation.ExpectationID || l["projectedDueAt"] != rec.ProjectedDueAt ||
		l["dueAt"] != rec.Lapse.DueAt || l["lapsedAt"] != rec.Lapse.LapsedAt || l["kind"] != rec.Expectation.Kind || l["expects"] != rec.Expectation.Expects {
		t.Errorf("lapse metadata %v does not match record lapse %+v", l, rec.Lapse)
	}
	if _, ok := l["lineage"]; !ok {
		t.Error("lapse lacks lineage")
	}
	if rec.LapseTaskID == "" || rec.LapseTaskID != got.TaskID {
		t.Errorf("lapseTaskId %q, agent returned %q", rec.LapseTaskID, got.TaskID)
	}
}

func scenarioOverdueLapseTask(t *testing.T) {
	for _, v := range []string{"1.0", "0.3"} {
		t.Run("A2A "+v, func(t *testing.T) {
			e := startEnv(t)
			ag := register(t, e, v)
			e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
				payment("late", ts(1500*time.Millisecond), func(m map[string]any) { m["grace"] = "PT3S" }),
				payment("kept", ts(time.Hour), func(m map[string]any) { m["grace"] = "PT2S" }),
			)))
			// Past due but in grace: open and marked.
			e.waitRecord(agentID, "late", func(r *expect.Record) bool { return r.PastDue })
			if r := e.record(agentID, "late"); r.State != expect.StateOpen {
				t.Fatalf("in grace: %+v", r)
			}
			e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.kept", ts(0))}}))
			rec := e.waitRecord(agentID, "late", func(r *expect.Record) bool { return r.LapseTaskID != "" })
			if rec.State != expect.StateLapsed || rec.Lapse.Lapse != expect.Overdue {
				t.Fatalf("record: %+v", rec)
			}
			msgs := ag.WaitFor(1, 10*time.Second)
			checkLapseMessage(t, msgs[0], rec, expect.Overdue)
			if kept := e.record(agentID, "kept"); kept.State != expect.StateSatisfied || kept.Lapse != nil {
				t.Fatalf("kept: %+v", kept)
			}
			time.Sleep(300 * time.Millisecond)
			if n := len(ag.Received()); n != 1 {
				t.Fatalf("agent received %d tasks, want exactly 1", n)
			}
		})
	}
}

func scenarioFactsExactMatchSourceLateAndIdempotent(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("a", ts(time.Hour)),
		payment("b", ts(-time.Minute), func(m map[string]any) { m["grace"] = "PT1H" }),
		payment("c", ts(time.Hour), func(m map[string]any) {
			m["subject"] = map[string]any{"type": "invoice", "id": "43"}
			m["satisfiedBy"] = map[string]any{"factKey": "invoice.42.a"}
		}),
	)))
	var out struct {
		Facts []struct {
			FactKey   string
			Satisfied []string
		}
	}
	// Near misses match nothing.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.A", ts(0)), fact("invoice.42.a ", ts(0))}})).json(t, &out)
	if len(out.Facts[0].Satisfied)+len(out.Facts[1].Satisfied) != 0 {
		t.Fatalf("near misses matched: %+v", out)
	}
	// With a subject, only that subject's expectation.
	f := fact("invoice.42.a", ts(-time.Second))
	f["subject"] = map[string]any{"type": "invoice", "id": "42"}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{f}}, factsToken)).json(t, &out)
	if !slices.Equal(out.Facts[0].Satisfied, []string{"a"}) {
		t.Fatalf("satisfied %v, want [a]", out.Facts[0].Satisfied)
	}
	a := e.record(agentID, "a")
	if a.State != expect.StateSatisfied || a.Late || a.SatisfiedBy.Source != "reporter-7" || a.SatisfiedAt == "" || a.ObservedAt == "" {
		t.Fatalf("a: %+v (source must be the authenticated reporter)", a)
	}
	if c := e.record(agentID, "c"); c.State != expect.StateOpen {
		t.Fatalf("c is on another subject: %+v", c)
	}
	// The same fact again changes nothing.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{f}}, factsToken)).json(t, &out)
	if len(out.Facts[0].Satisfied) != 0 {
		t.Fatalf("second report satisfied %v", out.Facts[0].Satisfied)
	}
	if again := e.record(agentID, "a"); again.SatisfiedAt != a.SatisfiedAt {
		t.Fatal("a repeated fact changed the record")
	}
	// Without a subject: every expectation with the key, here c.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.a", ts(0))}})).json(t, &out)
	if !slices.Equal(out.Facts[0].Satisfied, []string{"c"}) {
		t.Fatalf("satisfied %v, want [c]", out.Facts[0].Satisfied)
	}
	// Late: observed after dueAt.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.b", ts(0))}}))
	if b := e.record(agentID, "b"); !b.Late || b.State != expect.StateSatisfied {
		t.Fatalf("b: %+v", b)
	}
	// Fact keys and ids up to their limits fit every store's key limits.
	longKey := strings.Repeat("k#%", 1300)
	long := payment(strings.Repeat("i", 250), ts(time.Hour), func(m map[string]any) {
		m["satisfiedBy"] = map[string]any{"factKey": longKey}
		m["subject"] = map[string]any{"type": strings.Repeat("t", 250), "id": strings.Repeat("#", 250)}
	})
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(long)))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact(longKey, ts(0))}})).json(t, &out)
	if len(out.Facts[0].Satisfied) != 1 {
		t.Fatalf("long fact key: %+v", out)
	}
	// Bad facts change nothing and name the field.
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("k", "yesterday")}})), "facts[0].observedAt")
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("k", ts(48*time.Hour))}})), "facts[0].observedAt")
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{map[string]any{"observedAt": ts(0)}}})), "facts[0].factKey")
}

func scenarioSkippedLapse(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("step-1", ts(time.Hour)),
		payment("step-2", ts(2*time.Hour), func(m map[string]any) { m["after"] = []string{"step-1"} }),
	)))
	// A fact on the subject before the skip, to show lastFactAt.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.step-2", ts(-time.Second))}}))
	rec := e.waitRecord(agentID, "step-1", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	if rec.Lapse.Lapse != expect.Skipped || !slices.Equal(rec.Lapse.SatisfiedAfter, []string{"step-2"}) || rec.Lapse.LastFactAt == "" {
		t.Fatalf("skipped lapse: %+v", rec.Lapse)
	}
	msgs := ag.WaitFor(1, 10*time.Second)
	checkLapseMessage(t, msgs[0], rec, expect.Skipped)
	l := msgs[0].Metadata[expect.URI].(map[string]any)["lapse"].(map[string]any)
	if fmt.Sprint(l["satisfiedAfter"]) != "[step-2]" {
		t.Fatalf("satisfiedAfter in message: %v", l["satisfiedAfter"])
	}
	// A late fact for the skipped step is still recorded.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.step-1", ts(0))}}))
	if r := e.record(agentID, "step-1"); r.State != expect.StateLapsed || r.SatisfiedBy == nil || !r.Late {
		t.Fatalf("late after skip: %+v", r)
	}
}

func scenarioStalledLapse(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "0.3")
	far := ts(24 * time.Hour)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("silent", far, func(m map[string]any) { m["horizon"] = ts(300 * time.Millisecond) }),
		payment("busy", far, func(m map[string]any) {
			m["horizon"] = ts(2500 * time.Millisecond)
			m["subject"] = map[string]any{"type": "invoice", "id": "77"}
		}),
	)))
	// Any fact on busy's subject keeps it from stalling.
	other := fact("invoice.77.note", ts(0))
	other["subject"] = map[string]any{"type": "invoice", "id": "77"}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{other}}))
	rec := e.waitRecord(agentID, "silent", func(r *expect.Record) bool { return r.LapseTaskID != "" })
	if rec.Lapse.Lapse != expect.Stalled || rec.Lapse.LastFactAt != "" {
		t.Fatalf("stalled: %+v", rec.Lapse)
	}
	checkLapseMessage(t, ag.WaitFor(1, 10*time.Second)[0], rec, expect.Stalled)
	busy := e.waitRecord(agentID, "busy", func(r *expect.Record) bool { return r.HorizonChecked })
	if busy.State != expect.StateOpen {
		t.Fatalf("busy must stay open: %+v", busy)
	}
}

func scenarioAnchorsReanchorChains(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	projected := ts(48 * time.Hour)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("ship", ts(time.Hour)),
		payment("deliver", projected, func(m map[string]any) { m["anchor"] = map[string]any{"expectationId": "ship", "offset": "PT2H"} }),
		payment("invoice", projected, func(m map[string]any) { m["anchor"] = map[string]any{"expectationId": "deliver", "offset": "P1D"} }),
	)))
	shipped := time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.ship", expect.FormatTime(shipped))}}))
	// Re-anchoring runs from the change feed, just after the fact commits.
	d := e.waitRecord(agentID, "deliver", func(r *expect.Record) bool { return r.DueAt != projected })
	if d.DueAt != expect.FormatTime(shipped.Add(2*time.Hour)) || d.ProjectedDueAt != projected {
		t.Fatalf("deliver re-anchored: due %s projected %s", d.DueAt, d.ProjectedDueAt)
	}
	if i := e.record(agentID, "invoice"); i.DueAt != projected {
		t.Fatalf("invoice must wait for deliver: %s", i.DueAt)
	}
	delivered := shipped.Add(30 * time.Minute)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.deliver", expect.FormatTime(delivered))}}))
	if i := e.waitRecord(agentID, "invoice", func(r *expect.Record) bool { return r.DueAt != projected }); i.DueAt != expect.FormatTime(delivered.Add(24*time.Hour)) || i.ProjectedDueAt != projected {
		t.Fatalf("chain re-anchored: %+v", i)
	}
	// Re-anchored into the past beyond its grace: lapses at once.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("early", ts(time.Hour)),
		payment("follow", projected, func(m map[string]any) { m["anchor"] = map[string]any{"expectationId": "early", "offset": "PT1M"} }),
	)))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.early", ts(-time.Hour))}}))
	if f := e.waitRecord(agentID, "follow", func(r *expect.Record) bool { return r.State != expect.StateOpen }); f.State != expect.StateLapsed || f.Lapse.Lapse != expect.Overdue {
		t.Fatalf("follow: %+v", f)
	}
}

func scenarioSupersedeAndLineage(t *testing.T) {
	e := startEnv(t, func(c *Config) { c.Rules = expect.DefaultConfig(); c.Rules.MaxLineage = 2 })
	register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("v0", ts(time.Hour)))))
	for i := 1; i <= 2; i++ {
		var out struct{ Records []expect.Record }
		e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment(fmt.Sprintf("v%d", i), ts(time.Hour), func(m map[string]any) { m["supersedes"] = fmt.Sprintf("v%d", i-1) })))).json(t, &out)
		if out.Records[0].Lineage != i {
			t.Fatalf("lineage %d, want %d", out.Records[0].Lineage, i)
		}
		old := e.record(agentID, fmt.Sprintf("v%d", i-1))
		if old.State != expect.StateWithdrawn || !strings.Contains(old.WithdrawnReason, fmt.Sprintf("v%d", i)) {
			t.Fatalf("superseded: %+v", old)
		}
	}
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("v3", ts(time.Hour), func(m map[string]any) { m["supersedes"] = "v2" })))), "expectations[0].supersedes")
	if r := e.record(agentID, "v2"); r.State != expect.StateOpen {
		t.Fatal("a rejected supersede must not withdraw")
	}
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("v9", ts(time.Hour), func(m map[string]any) { m["supersedes"] = "v0" })))), "expectations[0].supersedes")
}

func scenarioWithdrawAndTaskCancel(t *testing.T) {
	e := startEnv(t)
	ag := register(t, e, "1.0")
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("w", ts(2*time.Second)))))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/withdrawals", map[string]any{"withdraw": []string{"w"}, "reason": "customer cancelled"}))
	e.must(404, e.call("POST", "/v1/agents/"+agentID+"/withdrawals", map[string]any{"withdraw": []string{"ghost"}}))
	other := raiseBody(payment("t1", ts(2*time.Second)), payment("t2", ts(2*time.Second)))
	other["taskId"] = "task-9"
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", other))
	cancel := map[string]any{"statusUpdate": map[string]any{"taskId": "task-9", "contextId": "ctx-1", "status": map[string]any{"state": "TASK_STATE_CANCELED"}}}
	var res struct{ Canceled []expect.Record }
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/a2a", cancel)).json(t, &res)
	if len(res.Canceled) != 2 {
		t.Fatalf("canceled %d, want 2", len(res.Canceled))
	}
	// Past every due time (and the Scheduler's one-second rounding).
	time.Sleep(3500 * time.Millisecond)
	for _, id := range []string{"w", "t1", "t2"} {
		if r := e.record(agentID, id); r.State != expect.StateWithdrawn || r.Lapse != nil {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	if n := len(ag.Received()); n != 0 {
		t.Fatalf("withdrawn expectations produced %d lapse tasks", n)
	}
	e.must(409, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("w", ts(time.Hour)))))
}

func scenarioA2AEndpoint(t *testing.T) {
	e := startEnv(t)
	register(t, e, "1.0")
	meta := func(v any) map[string]any { return map[string]any{expect.URI: v} }
	task := map[string]any{"task": map[string]any{
		"id": "task-a2a", "contextId": "ctx-a2a", "status": map[string]any{"state": "TASK_STATE_WORKING"},
		"artifacts": []any{map[string]any{"artifactId": "a1", "parts": []any{}, "metadata": meta(map[string]any{
			"expectations": []any{payment("from-a2a", ts(time.Hour)), payment("gone", ts(time.Hour))},
		})}},
	}}
	r := e.call("POST", "/v1/agents/"+agentID+"/a2a", task)
	e.must(200, r)
	if r.header.Get("A2A-Extensions") != "" {
		t.Fatal("no activation, no echo")
	}
	rec := e.record(agentID, "from-a2a")
	if rec.TaskID != "task-a2a" || rec.ContextID != "ctx-a2a" {
		t.Fatalf("origin task from the A2A task: %+v", rec)
	}
	for _, hdr := range []string{"A2A-Extensions", "X-A2A-Extensions"} {
		msg := map[string]any{"message": map[string]any{"messageId": "m1", "role": "ROLE_AGENT", "taskId": "task-a2a", "contextId": "ctx-a2a", "parts": []any{},
			"metadata": meta(map[string]any{"facts": []any{fact("invoice.42.from-a2a", ts(0))}})}}
		body, _ := json.Marshal(msg)
		req := e.request("POST", "/v1/agents/"+agentID+"/a2a", body)
		req.Header.Set(hdr, expect.URI)
		r := e.do(req)
		e.must(200, r)
		if r.header.Get("A2A-Extensions") != expect.URI {
			t.Fatalf("%s activation not echoed", hdr)
		}
	}
	if rec := e.record(agentID, "from-a2a"); rec.State != expect.StateSatisfied {
		t.Fatalf("fact from message metadata: %+v", rec)
	}
	// Withdraw through an artifact update; and a bare Task works too.
	upd := map[string]any{"artifactUpdate": map[string]any{"taskId": "task-a2a", "contextId": "ctx-a2a", "artifact": map[string]any{"artifactId": "a2", "parts": []any{}, "metadata": meta(map[string]any{"withdraw": []string{"gone"}})}}}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/a2a", upd))
	if r := e.record(agentID, "gone"); r.State != expect.StateWithdrawn {
		t.Fatalf("gone: %+v", r)
	}
	bare := map[string]any{"id": "task-bare", "contextId": "ctx-b", "status": map[string]any{"state": "working"},
		"artifacts": []any{map[string]any{"metadata": meta(map[string]any{"expectations": []any{payment("bare", ts(time.Hour))}})}}}
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/a2a", bare))
	if r := e.record(agentID, "bare"); r.TaskID != "task-bare" {
		t.Fatalf("bare: %+v", r)
	}
	// Bad extension data names its path; facts need facts:write.
	badMsg := map[string]any{"message": map[string]any{"messageId": "m2", "metadata": meta(map[string]any{"facts": []any{fact("k", "nope")}})}}
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/a2a", badMsg)), "facts[0].observedAt")
	e.must(403, e.call("POST", "/v1/agents/"+agentID+"/a2a", task, factsToken))
	problem(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/a2a", `{"hello":"world"}`)))
}
