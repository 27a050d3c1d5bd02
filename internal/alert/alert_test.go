package alert

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/retry"
)

func TestParseChannel(t *testing.T) {
	secret := NewWebhookSecret()
	all := Capabilities{EventBridge: true, Email: true}
	cases := []struct {
		name  string
		id    string
		body  string
		caps  Capabilities
		field string // "" when valid
	}{
		{"webhook", "ops", `{"type":"webhook","url":"https://h.example/x","secret":"` + secret + `"}`, all, ""},
		{"webhook generated secret", "ops", `{"type":"webhook","url":"https://h.example/x"}`, all, ""},
		{"webhook http refused", "ops", `{"type":"webhook","url":"http://h.example/x"}`, all, "url"},
		{"webhook http with insecure", "ops", `{"type":"webhook","url":"http://127.0.0.1:1/x"}`, Capabilities{InsecureURLs: true}, ""},
		{"webhook user info", "ops", `{"type":"webhook","url":"https://u:p@h.example/x"}`, all, "url"},
		{"webhook bad secret", "ops", `{"type":"webhook","url":"https://h.example/x","secret":"s3cret"}`, all, "secret"},
		{"webhook short secret", "ops", `{"type":"webhook","url":"https://h.example/x","secret":"whsec_AAAA"}`, all, "secret"},
		{"slack", "s", `{"type":"slack","url":"https://hooks.slack.com/services/T/B/x"}`, all, ""},
		{"slack with secret", "s", `{"type":"slack","url":"https://hooks.slack.com/services/T/B/x","secret":"` + secret + `"}`, all, "secret"},
		{"pagerduty", "p", `{"type":"pagerduty","routingKey":"abc"}`, all, ""},
		{"pagerduty no key", "p", `{"type":"pagerduty"}`, all, "routingKey"},
		{"email", "m", `{"type":"email","to":["a@example.com"]}`, all, ""},
		{"email named", "m", `{"type":"email","to":["A <a@example.com>"]}`, all, "to[0]"},
		{"email header injection", "m", `{"type":"email","to":["a@example.com\r\nBcc: x@example.com"]}`, all, "to[0]"},
		{"email without sender", "m", `{"type":"email","to":["a@example.com"]}`, Capabilities{}, "type"},
		{"eventbridge", "e", `{"type":"eventbridge","eventBusName":"ops"}`, all, ""},
		{"eventbridge embedded", "e", `{"type":"eventbridge","eventBusName":"ops"}`, Capabilities{}, "type"},
		{"eventbridge bad bus", "e", `{"type":"eventbridge","eventBusName":"a b"}`, all, "eventBusName"},
		{"unknown type", "x", `{"type":"sms"}`, all, "type"},
		{"unknown field", "x", `{"type":"slack","url":"https://h.example","channel":"#ops"}`, all, "body"},
		{"bad id", "no spaces", `{"type":"slack","url":"https://h.example"}`, all, "channelId"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ch, sec, generated, err := ParseChannel(c.id, []byte(c.body), c.caps)
			if c.field == "" {
				if err != nil {
					t.Fatalf("ParseChannel: %v", err)
				}
				if ch.Type == Webhook && (sec.WebhookSecret == "" || generated != !strings.Contains(c.body, "secret")) {
					t.Fatalf("webhook secret %q generated %v", sec.WebhookSecret, generated)
				}
				if ch.Type == Slack && (ch.URL != "" || sec.SlackURL == "") {
					t.Fatalf("the Slack URL must be kept as a secret only: %+v %+v", ch, sec)
				}
				return
			}
			var e *errs.Error
			if err == nil || !errorsAs(err, &e) || e.Code != errs.Invalid {
				t.Fatalf("ParseChannel = %v, want an Invalid error on %s", err, c.field)
			}
			for _, f := range e.Fields {
				if f.Path == c.field {
					return
				}
			}
			t.Fatalf("fields %+v, want %s", e.Fields, c.field)
		})
	}
}

func errorsAs(err error, target **errs.Error) bool {
	e, ok := err.(*errs.Error)
	if ok {
		*target = e
	}
	return ok
}

func TestVisibility(t *testing.T) {
	op := Channel{Owners: []string{"*"}}
	ten := Channel{Owners: []string{"a", "b"}}
	cases := []struct {
		ch                        Channel
		agents                    []string
		visible, manageable       bool
		servesA, servesOtherAgent bool
	}{
		{op, []string{"*"}, true, true, true, true},
		{op, []string{"a"}, false, false, true, true},
		{ten, []string{"*"}, true, true, true, false},
		{ten, []string{"a"}, true, false, true, false},
		{ten, []string{"a", "b"}, true, true, true, false},
		{ten, []string{"c"}, false, false, true, false},
	}
	for i, c := range cases {
		if got := c.ch.VisibleTo(c.agents); got != c.visible {
			t.Errorf("%d: visible %v", i, got)
		}
		if got := c.ch.ManageableBy(c.agents); got != c.manageable {
			t.Errorf("%d: manageable %v", i, got)
		}
		if c.ch.Serves("a", false) != c.servesA || c.ch.Serves("z", false) != c.servesOtherAgent {
			t.Errorf("%d: serves", i)
		}
	}
	// An operator's channel that is not shared serves only the rules an
	// operator wrote; a tenant's never serves another's agents.
	no := false
	private := Channel{Owners: []string{"*"}, Shared: &no}
	if private.Serves("a", false) || !private.Serves("a", true) || ten.Serves("z", true) {
		t.Error("serves: a private operator channel or a tenant's channel")
	}
}

func TestParseRules(t *testing.T) {
	usable := func(id string) bool { return id == "ops" }
	cases := []struct {
		body, field string
	}{
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["ops"]}]}`, ""},
		{`{"rules":[]}`, ""},
		{`{}`, "rules"},
		{`{"rules":[{"on":["expectation.late"],"channels":["ops"]}]}`, "rules[0].on[0]"},
		{`{"rules":[{"on":["channel.test"],"channels":["ops"]}]}`, "rules[0].on[0]"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["other"]}]}`, "rules[0].channels[0]"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":[]}]}`, "rules[0].channels"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["ops"],"lapses":["late"]}]}`, "rules[0].lapses[0]"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["ops"],"cooldown":"PT10M"}]}`, ""},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["ops"],"cooldown":"P1M"}]}`, "rules[0].cooldown"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["ops"],"cooldown":"P8D"}]}`, "rules[0].cooldown"},
		{`{"rules":[{"on":["expectation.lapsed"],"channels":["ops"],"extra":1}]}`, "body"},
	}
	for _, c := range cases {
		_, err := ParseRules("a", []byte(c.body), usable)
		if c.field == "" {
			if err != nil {
				t.Errorf("%s: %v", c.body, err)
			}
			continue
		}
		e, ok := err.(*errs.Error)
		if !ok {
			t.Errorf("%s: %v, want an Invalid error", c.body, err)
			continue
		}
		found := false
		for _, f := range e.Fields {
			found = found || f.Path == c.field
		}
		if !found {
			t.Errorf("%s: fields %+v, want %s", c.body, e.Fields, c.field)
		}
	}
}

func TestRuleMatches(t *testing.T) {
	occ := Occurrence{Event: Event{Type: Lapsed}, About: Subject{Kind: "payment", Lapse: "overdue"}}
	cases := []struct {
		r    Rule
		want bool
	}{
		{Rule{On: []EventType{Lapsed}}, true},
		{Rule{On: []EventType{Recovered}}, false},
		{Rule{On: []EventType{Lapsed}, Kinds: []string{"payment"}}, true},
		{Rule{On: []EventType{Lapsed}, Kinds: []string{"shipment"}}, false},
		{Rule{On: []EventType{Lapsed}, Lapses: []string{"stalled"}}, false},
		{Rule{On: []EventType{Lapsed}, Lapses: []string{"overdue", "stalled"}}, true},
	}
	for i, c := range cases {
		if got := c.r.Matches(occ); got != c.want {
			t.Errorf("%d: %v", i, got)
		}
	}
	// An acknowledgement goes where the lapse went (its filters apply),
	// and to rules that name it.
	ack := Occurrence{Event: Event{Type: Acknowledged}, About: Subject{Kind: "payment", Lapse: "overdue"}}
	for i, c := range []struct {
		r    Rule
		want bool
	}{
		{Rule{On: []EventType{Lapsed}}, true},
		{Rule{On: []EventType{Acknowledged}}, true},
		{Rule{On: []EventType{Recovered}}, false},
		{Rule{On: []EventType{DeliveryDead}}, false},
		{Rule{On: []EventType{Lapsed}, Kinds: []string{"shipment"}}, false},
	} {
		if got := c.r.Matches(ack); got != c.want {
			t.Errorf("acknowledged %d: %v", i, got)
		}
	}
}

// TestAcknowledgedEvent: an acknowledgement of a lapse is one
// expectation.acknowledged occurrence (once: a later change of the
// acknowledged record makes none), which PagerDuty receives as an
// acknowledge of the lapse's incident.
func TestAcknowledgedEvent(t *testing.T) {
	lapsed := &expect.Record{AgentID: "a", Expectation: expect.Expectation{ExpectationID: "e", Kind: "payment"},
		Lapse: &expect.Lapse{Lapse: expect.Overdue, LapsedAt: "2026-12-06T08:00:00Z"}}
	acked := lapsed.Clone()
	acked.Ack = &expect.Ack{By: "alice", At: "2026-12-06T08:05:00Z", Note: "on it"}
	occs := FromExpectation(lapsed, acked, nil)
	if len(occs) != 1 || occs[0].Event.Type != Acknowledged || occs[0].Event.Data.AcknowledgedBy != "alice" || occs[0].Event.Timestamp != "2026-12-06T08:05:00Z" {
		t.Fatalf("occurrences %+v", occs)
	}
	later := acked.Clone()
	later.Delivery = &expect.Delivery{Attempts: 2}
	if occs := FromExpectation(acked, later, nil); len(occs) != 0 {
		t.Fatalf("a later change made %+v", occs)
	}
	n := &Notification{ID: "ntf_x", AgentID: "a", Event: occs0(t, lapsed, acked).Event, About: occs0(t, lapsed, acked).About, DedupKey: DedupKey("a", "E#e")}
	body, err := PagerDutyBody(n, "rk", "")
	if err != nil {
		t.Fatal(err)
	}
	var pd struct {
		Action   string `json:"event_action"`
		DedupKey string `json:"dedup_key"`
		Payload  struct{ Summary string }
	}
	if err := json.Unmarshal(body, &pd); err != nil || pd.Action != "acknowledge" || pd.DedupKey != n.DedupKey ||
		!strings.Contains(pd.Payload.Summary, "acknowledged by alice: on it") {
		t.Fatalf("pagerduty %s (%v)", body, err)
	}
}

func occs0(t *testing.T, old, cur *expect.Record) Occurrence {
	t.Helper()
	occs := FromExpectation(old, cur, nil)
	if len(occs) == 0 {
		t.Fatal("no occurrence")
	}
	return occs[0]
}

// TestCooldownAdmit: one per window, the next one reports what was held,
// and a replayed occurrence is decided once.
func TestCooldownAdmit(t *testing.T) {
	var cd Cooldown
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := 10 * time.Minute
	steps := []struct {
		key         string
		at          time.Duration
		send        bool
		held        int
		wantChanged bool
	}{
		{"a", 0, true, 0, true},
		{"a", time.Second, false, 0, false}, // replay of a
		{"b", time.Minute, false, 0, true},
		{"c", 2 * time.Minute, false, 0, true},
		{"b", 3 * time.Minute, false, 0, false}, // replay of b
		{"d", 11 * time.Minute, true, 2, true},
		{"e", 12 * time.Minute, false, 0, true},
		{"f", 30 * time.Minute, true, 1, true},
	}
	for i, s := range steps {
		send, held, changed := cd.Admit(s.key, d, t0.Add(s.at))
		if send != s.send || held != s.held || changed != s.wantChanged {
			t.Fatalf("step %d (%s): send %v held %d changed %v, want %v %d %v", i, s.key, send, held, changed, s.send, s.held, s.wantChanged)
		}
	}
}

func TestNotificationStates(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	policy := retry.Policy{Base: time.Second, Ceiling: 4 * time.Second, MaxAttempts: 4}
	down := retry.Failure{Class: retry.ServerError}
	n := &Notification{ID: "ntf_1"}
	for i := 1; i <= 3; i++ {
		n.Failed(now, "the receiver answered 503", down, policy)
		if n.Dead || !n.Pending() || n.LastErrorClass != "server-error" || n.FailingSince != expect.FormatTime(now) {
			t.Fatalf("attempt %d: %+v", i, n)
		}
	}
	if w := n.Wait(now); w <= 0 || w > time.Second {
		t.Fatalf("backoff after 3 failures in the first second: %v", w)
	}
	n.Failed(now, "the receiver answered 503", down, policy)
	if !n.Dead || n.Pending() || n.DeadAt == "" {
		t.Fatalf("not dead after max attempts: %+v", n)
	}
	if !n.Replay(now) || n.Dead || n.Attempts != 0 || n.Replays != 1 || !n.Pending() || n.FailingSince != "" || n.LastErrorClass != "" {
		t.Fatalf("replay: %+v", n)
	}
	if n.Replay(now) {
		t.Fatal("replayed a notification that is not dead")
	}
	n.Delivered(now)
	if n.Pending() || n.DeliveredAt == "" {
		t.Fatalf("delivered: %+v", n)
	}
	p := &Notification{}
	p.Failed(now, "refused", retry.Failure{Class: retry.Rejected, Permanent: true}, policy)
	if !p.Dead || p.Attempts != 1 {
		t.Fatalf("permanent failure: %+v", p)
	}
	// Waiting for the channel's circuit counts no attempt, and ends in a
	// dead letter when the window closes.
	w := &Notification{ID: "ntf_2"}
	window := retry.Policy{For: time.Hour}
	w.WaitForProbe(now, now.Add(time.Minute), window)
	if w.Attempts != 0 || !w.WaitingForProbe || w.Wait(now) != time.Minute || w.Dead {
		t.Fatalf("waiting: %+v", w)
	}
	w.WaitForProbe(now.Add(50*time.Minute), now.Add(2*time.Hour), window)
	if w.Wait(now.Add(50*time.Minute)) != 10*time.Minute {
		t.Fatalf("a wait past the window ends at the window: %+v", w)
	}
	w.WaitForProbe(now.Add(time.Hour), now.Add(3*time.Hour), window)
	if !w.Dead || w.LastError == "" || w.Pending() {
		t.Fatalf("the window closed while waiting: %+v", w)
	}
}

func TestFromExpectation(t *testing.T) {
	base := expect.Record{AgentID: "a", State: expect.StateOpen, DueAt: "2026-01-01T00:00:00Z"}
	base.Expectation.ExpectationID, base.Expectation.Kind = "e1", "payment"
	lapsed := base
	lapsed.State = expect.StateLapsed
	lapsed.Lapse = &expect.Lapse{Lapse: expect.Overdue, LapsedAt: "2026-01-01T00:05:00Z"}
	lapsed.Delivery = &expect.Delivery{MessageID: "m1"}
	recovered := lapsed
	recovered.SatisfiedBy = &expect.Fact{FactKey: "k"}
	recovered.SatisfiedAt = "2026-01-01T00:06:00Z"
	dead := lapsed
	dead.Delivery = &expect.Delivery{MessageID: "m1", Attempts: 8, DeadLettered: true, LastError: "the agent answered 500"}
	types := func(os []Occurrence) (out []string) {
		for _, o := range os {
			out = append(out, string(o.Event.Type))
		}
		return out
	}
	cases := []struct {
		name     string
		old, cur *expect.Record
		want     string
	}{
		{"raise", nil, &base, ""},
		{"lapse", &base, &lapsed, "expectation.lapsed"},
		{"replayed lapse change", &base, &lapsed, "expectation.lapsed"},
		{"unrelated change after lapse", &lapsed, &lapsed, ""},
		{"late fact", &lapsed, &recovered, "expectation.recovered"},
		{"dead delivery", &lapsed, &dead, "delivery.dead"},
		{"fact before lapse", &base, func() *expect.Record { r := base; r.SatisfiedBy = &expect.Fact{}; return &r }(), ""},
	}
	for _, c := range cases {
		got := strings.Join(types(FromExpectation(c.old, c.cur, json.RawMessage(`{}`))), ",")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	a := FromExpectation(&base, &lapsed, nil)
	b := FromExpectation(&base, &lapsed, nil)
	if a[0].Key != b[0].Key || NotificationID(a[0].Key, "r", "c") != NotificationID(b[0].Key, "r", "c") {
		t.Fatal("a replayed change must make the same occurrence key and notification id")
	}
	if d := FromExpectation(&lapsed, &dead, nil); d[0].Event.Data.Reason != "the agent answered 500" {
		t.Fatalf("dead delivery reason: %+v", d[0].Event.Data)
	}
}

func TestFromVerification(t *testing.T) {
	v := &anticipate.Verification{VerificationID: "v1", AgentID: "a", PlanID: "p", Verdict: anticipate.VerdictFail,
		Results:            []anticipate.Result{{CriterionID: "c1", Status: anticipate.StatusPass}, {CriterionID: "c2", Status: anticipate.StatusFail}},
		AntiCriteriaFailed: []string{"ac1"}}
	occ := FromVerification("", v, nil)
	if len(occ) != 2 || occ[0].Event.Type != VerificationCompleted || occ[1].Event.Type != VerificationFailed ||
		strings.Join(occ[1].Event.Data.FailedCriteria, ",") != "c2,ac1" || occ[0].Event.Data.Verdict != "FAIL" || occ[0].Key == occ[1].Key {
		t.Fatalf("occurrences: %+v", occ)
	}
	if len(FromVerification(anticipate.VerdictFail, v, nil)) != 0 {
		t.Fatal("a VERIFY already FAIL is not a new event")
	}
	v.Verdict = anticipate.VerdictPass
	if occ := FromVerification(anticipate.VerdictPending, v, nil); len(occ) != 1 || occ[0].Event.Type != VerificationCompleted {
		t.Fatalf("PASS after PENDING: %+v", occ)
	}
	if len(FromVerification(anticipate.VerdictPass, v, nil)) != 0 {
		t.Fatal("a VERIFY already PASS is not a new event")
	}
	v.Verdict = anticipate.VerdictPending
	if len(FromVerification("", v, nil)) != 0 {
		t.Fatal("PENDING is no event")
	}
}

// TestRenderedPayloads: the webhook signature verifies with the Standard
// Webhooks library; Slack, PagerDuty and mail carry what their receivers
// read.
func TestRenderedPayloads(t *testing.T) {
	n := &Notification{ID: "ntf_1", AgentID: "a", ChannelID: "c", DedupKey: DedupKey("a", "E#e1"),
		Event: Event{Type: Recovered, Timestamp: "2026-01-01T00:06:00Z", Data: EventData{AgentID: "a", Record: json.RawMessage(`{"x":1}`)}},
		About: Subject{ExpectationID: "e1", Kind: "payment", SubjectType: "invoice", SubjectID: "42", Expects: "paid <soon>", DueAt: "2026-01-01T00:00:00Z", Lapse: "overdue"}}
	secret := NewWebhookSecret()
	body, _ := WebhookBody(n)
	wh, _ := standardwebhooks.NewWebhook(secret)
	now := time.Now()
	sig, err := wh.Sign(n.ID, now, body)
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string][]string{"Webhook-Id": {n.ID}, "Webhook-Timestamp": {strconv.Itoa(int(now.Unix()))}, "Webhook-Signature": {sig}}
	if err := wh.Verify(body, hdr); err != nil {
		t.Fatalf("signature: %v", err)
	}
	pd, _ := PagerDutyBody(n, "rk", "https://cw.example/console#/x")
	var ev map[string]any
	_ = json.Unmarshal(pd, &ev)
	if ev["event_action"] != "resolve" || ev["dedup_key"] != n.DedupKey || ev["routing_key"] != "rk" {
		t.Fatalf("pagerduty: %s", pd)
	}
	sl, _ := SlackBody(n, "")
	if !strings.Contains(string(sl), `paid \u0026lt;soon\u0026gt;`) {
		t.Fatalf("slack text is not escaped: %s", sl)
	}
	m := MailOf(n, "https://cw.example/console")
	if strings.ContainsAny(m.Subject, "\r\n") || !strings.Contains(m.Text, "Subject: invoice 42") {
		t.Fatalf("mail: %+v", m)
	}
	if ConsoleLink("https://cw.example/", n) != "https://cw.example/console#/agents/a/expectations/e1" {
		t.Fatalf("link %s", ConsoleLink("https://cw.example/", n))
	}
}
