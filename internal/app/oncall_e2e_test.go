package app

import (
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/expect"
)

// shortRepeats lets rules repeat every second (the server's floor is a
// minute by default), so that the scenarios run in seconds.
func shortRepeats(c *Config) { c.Notify.MinRepeat = time.Second }

// scenarioAlertsOnCall (issue 38): through the runtime's own clock and
// delivery, on both runtimes. A reminder arrives at dueAt - before, and
// none comes for an expectation raised later than that or satisfied
// first. A lapse nobody acknowledges is sent again (max times, the same
// PagerDuty incident) and escalated to a second channel; one acknowledged
// at once is neither repeated nor escalated.
func scenarioAlertsOnCall(t *testing.T) {
	e := startEnv(t, shortRepeats)
	ag := register(t, e, "1.0")
	ag.FailNext(1000, 500) // lapse tasks are not what this is about
	remind, escalated := slackReceiver(t), slackReceiver(t)
	pd := pagerDutyReceiver(t, "ONCALLKEY")
	e.must(201, e.call("PUT", "/v1/channels/remind-slack", map[string]any{"type": "slack", "url": remind.srv.URL + "/services/T0/B0/remind"}))
	e.must(201, e.call("PUT", "/v1/channels/oncall-pd", map[string]any{"type": "pagerduty", "routingKey": "ONCALLKEY", "url": pd.srv.URL + "/v2/enqueue"}))
	e.must(201, e.call("PUT", "/v1/channels/lead-slack", map[string]any{"type": "slack", "url": escalated.srv.URL + "/services/T0/B0/lead"}))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.due_soon"}, "channels": []string{"remind-slack"}, "before": "PT3S", "cooldown": "PT1H"},
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"oncall-pd"}, "repeat": map[string]any{"every": "PT2S", "max": 2},
			"escalate": []any{map[string]any{"after": "PT5S", "channels": []string{"lead-slack"}}}},
	}}))

	// A reminder is not an incident: not to PagerDuty.
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.due_soon"}, "channels": []string{"oncall-pd"}, "before": "PT3S"}}})), "rules[0].channels[0]")
	// The floor of repeat.every is the server's (a second here).
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"oncall-pd"}, "repeat": map[string]any{"every": "PT0.5S", "max": 2}}}})), "rules[0].repeat.every")

	// Reminders: "soon" is due in 6 s (reminded 3 s before), "soon-2" in
	// 7 s (the rule's cooldown holds back none: a reminder is made long
	// before it is sent); "late-raise"
	// is raised 1 s before it is due (later than its reminder); "paid" is
	// satisfied before its reminder's time.
	soonDue := time.Now().Add(6 * time.Second)
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("soon", expect.FormatTime(soonDue)), payment("soon-2", expect.FormatTime(soonDue.Add(time.Second))),
		payment("late-raise", ts(time.Second)), payment("paid", ts(5*time.Second)))))
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.paid", ts(0))}}))
	got := remind.waitFor("the reminders", func(g []map[string]any) bool {
		return count(g, func(m map[string]any) bool { return strings.HasPrefix(m["text"].(string), "Expectation soon ") }) >= 1 &&
			count(g, func(m map[string]any) bool { return strings.HasPrefix(m["text"].(string), "Expectation soon-2 ") }) >= 1
	})
	var at time.Time
	for _, m := range got {
		if strings.HasPrefix(m["text"].(string), "Expectation soon ") {
			at = m["receivedAt"].(time.Time)
		}
	}
	if want := soonDue.Add(-3 * time.Second); at.Before(want.Add(-time.Second)) {
		t.Fatalf("the reminder came at %v, %v before dueAt - before", at, want.Sub(at))
	}
	t.Logf("reminder: %v after dueAt - before", at.Sub(soonDue.Add(-3*time.Second)).Round(time.Millisecond))

	// Lapses: page-1 is left alone, page-2 is acknowledged as soon as its
	// incident is triggered.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("page-1", ts(100*time.Millisecond)), payment("page-2", ts(100*time.Millisecond)))))
	about := func(id string) func(m map[string]any) bool {
		return func(m map[string]any) bool { return strings.Contains(m["summary"].(string), "Expectation "+id+" ") }
	}
	pd.waitFor("page-2's trigger", func(g []map[string]any) bool { return count(g, about("page-2")) >= 1 })
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations/page-2/ack", map[string]any{"note": "mine"}))
	got = pd.waitFor("page-1's trigger and its two repeats", func(g []map[string]any) bool { return count(g, about("page-1")) >= 3 })
	var dedup string
	for _, m := range got {
		if !about("page-1")(m) {
			continue
		}
		if dedup == "" {
			dedup = m["dedup"].(string)
		}
		if m["action"] != "trigger" || m["dedup"] != dedup {
			t.Fatalf("page-1's notifications are not one incident triggered again: %v", got)
		}
	}
	escalated.waitFor("page-1's escalation", func(g []map[string]any) bool {
		return count(g, func(m map[string]any) bool {
			return strings.Contains(m["text"].(string), "Escalated") && strings.Contains(m["text"].(string), "page-1")
		}) == 1
	})
	// Acknowledged after its escalation, page-1's lead channel hears of it.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations/page-1/ack", nil))
	escalated.waitFor("page-1's acknowledgement on the escalation channel", func(g []map[string]any) bool {
		return count(g, func(m map[string]any) bool {
			return strings.Contains(m["text"].(string), "page-1") && strings.Contains(m["text"].(string), "acknowledged by admin")
		}) == 1
	})
	// By now page-2's repeats and escalation were due; they were skipped.
	time.Sleep(time.Second)
	pd.mu.Lock()
	final := append([]map[string]any(nil), pd.got...)
	pd.mu.Unlock()
	if n := count(final, func(m map[string]any) bool { return about("page-2")(m) && m["action"] == "trigger" }); n != 1 {
		t.Fatalf("page-2, acknowledged at once, was triggered %d times", n)
	}
	if n := count(final, about("page-1")); n != 3 {
		t.Fatalf("page-1 was sent %d times; want the lapse and 2 repeats", n)
	}
	escalated.mu.Lock()
	esc := append([]map[string]any(nil), escalated.got...)
	escalated.mu.Unlock()
	remind.mu.Lock()
	reminders := append([]map[string]any(nil), remind.got...)
	remind.mu.Unlock()
	if n := count(esc, func(m map[string]any) bool { return strings.Contains(m["text"].(string), "page-2") }); n != 0 {
		t.Fatalf("page-2 was escalated although acknowledged: %v", esc)
	}
	for _, m := range reminders {
		if txt := m["text"].(string); !strings.HasPrefix(txt, "Expectation soon ") && !strings.HasPrefix(txt, "Expectation soon-2 ") {
			t.Fatalf("a reminder that should not have been sent: %v", txt)
		}
	}
	// The skipped ones are on the timeline, saying why.
	var tl struct{ Notifications []alert.Notification }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		e.must(200, e.call("GET", "/v1/agents/"+agentID+"/notifications?expectationId=page-2", nil)).json(t, &tl)
		skipped := 0
		for _, n := range tl.Notifications {
			if strings.Contains(n.Skipped, "acknowledged by admin") {
				skipped++
			}
		}
		if skipped >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("page-2's timeline: %+v", tl.Notifications)
		}
	}
}

// scenarioAlertsSilenced (issue 38): a silence holds back the
// notifications it matches, recorded as silenced on the timeline; a
// lapse's repeats that fall after it ends are sent; lapse tasks are held
// back only by a silence that says so; a tenant silences only its own
// agents.
func scenarioAlertsSilenced(t *testing.T) {
	e := startEnv(t, shortRepeats)
	ag := register(t, e, "1.0")
	quiet := slackReceiver(t)
	e.must(201, e.call("PUT", "/v1/channels/quiet-slack", map[string]any{"type": "slack", "url": quiet.srv.URL + "/services/T0/B0/quiet"}))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"quiet-slack"}, "repeat": map[string]any{"every": "PT2S", "max": 3}},
	}}))
	subject := func(id string) func(map[string]any) {
		return func(m map[string]any) { m["subject"] = map[string]any{"type": "invoice", "id": id} }
	}
	// Tenants silence their own agents only.
	e.must(403, e.call("PUT", "/v1/silences/theirs", map[string]any{"matchers": map[string]any{"agentId": agentID},
		"startsAt": ts(-time.Minute), "endsAt": ts(time.Hour)}, tenantB))
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/silences/everyone", map[string]any{"matchers": map[string]any{},
		"startsAt": ts(-time.Minute), "endsAt": ts(time.Hour)}, tenantB)), "matchers.agentId")

	// Q- subjects are silenced for 3 s; T- subjects' lapse tasks too.
	silenceEnds := time.Now().Add(3 * time.Second)
	e.must(201, e.call("PUT", "/v1/silences/quiet-q", map[string]any{"matchers": map[string]any{"agentId": agentID, "subjectIdPrefix": "Q-"},
		"startsAt": ts(-time.Minute), "endsAt": expect.FormatTime(silenceEnds), "comment": "deploying the Q service"}))
	e.must(201, e.call("PUT", "/v1/silences/quiet-t", map[string]any{"matchers": map[string]any{"agentId": agentID, "subjectIdPrefix": "T-"},
		"startsAt": ts(-time.Minute), "endsAt": ts(time.Hour), "lapseTasks": true}))
	var list struct{ Silences []alert.Silence }
	e.must(200, e.call("GET", "/v1/silences", nil)).json(t, &list)
	if len(list.Silences) != 2 || list.Silences[0].CreatedBy != "admin" {
		t.Fatalf("silences: %+v", list.Silences)
	}
	e.must(404, e.call("GET", "/v1/silences/quiet-q", nil, tenantB))
	e.must(404, e.call("DELETE", "/v1/silences/quiet-q", nil, tenantB))

	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(
		payment("q-1", ts(100*time.Millisecond), subject("Q-1")), payment("t-1", ts(100*time.Millisecond), subject("T-1")))))
	// q-1's lapse and first repeat fall in the silence; the repeats after
	// it are sent.
	got := quiet.waitFor("q-1's repeats after the silence", func(g []map[string]any) bool {
		return count(g, func(m map[string]any) bool { return strings.Contains(m["text"].(string), "Expectation q-1 ") }) >= 1
	})
	for _, m := range got {
		if strings.Contains(m["text"].(string), "Expectation q-1 ") {
			if at := m["receivedAt"].(time.Time); at.Before(silenceEnds) {
				t.Fatalf("q-1 was sent at %v, inside its silence (until %v)", at, silenceEnds)
			}
			if !strings.Contains(m["text"].(string), "repeat") {
				t.Fatalf("q-1's first message after the silence is not a repeat: %v", m["text"])
			}
		}
	}
	var tl struct{ Notifications []alert.Notification }
	e.must(200, e.call("GET", "/v1/agents/"+agentID+"/notifications?expectationId=q-1", nil)).json(t, &tl)
	silenced := 0
	for _, n := range tl.Notifications {
		if n.Silenced == "quiet-q" && strings.Contains(n.Skipped, "silenced by quiet-q") {
			silenced++
		}
	}
	if silenced == 0 {
		t.Fatalf("q-1's timeline shows no silenced notification: %+v", tl.Notifications)
	}
	// t-1's lapse task is held back (recorded), its notification too; q-1's
	// lapse task went (its silence does not hold lapse tasks back).
	rec := e.waitRecord(agentID, "t-1", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.Suppressed })
	if rec.Delivery.SilencedBy != "quiet-t" {
		t.Fatalf("t-1's delivery: %+v", rec.Delivery)
	}
	e.waitRecord(agentID, "q-1", func(r *expect.Record) bool { return r.Delivery != nil && r.Delivery.DeliveredAt != "" })
	for _, r := range ag.Received() {
		if strings.Contains(r.Text, "t-1") {
			t.Fatalf("t-1's lapse task was sent: %+v", r)
		}
	}
	e.must(204, e.call("DELETE", "/v1/silences/quiet-t", nil))
	e.must(404, e.call("GET", "/v1/silences/quiet-t", nil))
}
