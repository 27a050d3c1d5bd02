package app

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/notify"
)

// receiver is a loopback HTTP receiver of one channel type that checks
// each request against the documented payload (check) and keeps what it
// accepted. While down it answers 503.
type receiver struct {
	t     *testing.T
	srv   *httptest.Server
	check func(r *http.Request, body []byte) (map[string]any, error)

	mu       sync.Mutex
	down     bool
	got      []map[string]any
	ids      map[string][]string // webhook-id -> bodies accepted
	refused  int
	problems []string
}

func newReceiver(t *testing.T, check func(*http.Request, []byte) (map[string]any, error)) *receiver {
	rc := &receiver{t: t, check: check, ids: map[string][]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.down {
			rc.refused++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		m, err := rc.check(r, body)
		if err != nil {
			rc.problems = append(rc.problems, err.Error())
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		m["receivedAt"] = time.Now()
		rc.got = append(rc.got, m)
		if id := r.Header.Get("webhook-id"); id != "" {
			rc.ids[id] = append(rc.ids[id], string(body))
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"status":"success"}`))
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) setDown(down bool) {
	rc.mu.Lock()
	rc.down = down
	rc.mu.Unlock()
}

// waitFor waits until accepted holds what cond needs, and returns it.
func (rc *receiver) waitFor(what string, cond func([]map[string]any) bool) []map[string]any {
	rc.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rc.mu.Lock()
		got := append([]map[string]any(nil), rc.got...)
		problems := append([]string(nil), rc.problems...)
		rc.mu.Unlock()
		if len(problems) > 0 {
			rc.t.Fatalf("%s: the receiver refused malformed notifications: %v", what, problems)
		}
		if cond(got) {
			return got
		}
		if time.Now().After(deadline) {
			rc.t.Fatalf("%s: never received; got %v", what, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ofType(typ alert.EventType) func(m map[string]any) bool {
	return func(m map[string]any) bool { return m["type"] == string(typ) }
}

func count(got []map[string]any, f func(map[string]any) bool) int {
	n := 0
	for _, m := range got {
		if f(m) {
			n++
		}
	}
	return n
}

// webhookReceiver verifies every request with the Standard Webhooks
// reference library, as a receiver in the field would.
func webhookReceiver(t *testing.T, secret string) *receiver {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	return newReceiver(t, func(r *http.Request, body []byte) (map[string]any, error) {
		if err := wh.Verify(body, r.Header); err != nil {
			return nil, err
		}
		var m map[string]any
		err := json.Unmarshal(body, &m)
		return m, err
	})
}

// slackReceiver checks an incoming-webhook body: text, and blocks of
// known types.
func slackReceiver(t *testing.T) *receiver {
	return newReceiver(t, func(r *http.Request, body []byte) (map[string]any, error) {
		var m struct {
			Text   string           `json:"text"`
			Blocks []map[string]any `json:"blocks"`
		}
		if err := json.Unmarshal(body, &m); err != nil || m.Text == "" || len(m.Blocks) == 0 {
			return nil, errf("slack body %s", body)
		}
		for _, b := range m.Blocks {
			switch b["type"] {
			case "section", "context":
			default:
				return nil, errf("slack block type %v", b["type"])
			}
		}
		return map[string]any{"text": m.Text}, nil
	})
}

// pagerDutyReceiver checks an Events API v2 event (its event_action is
// one of the three the API defines).
func pagerDutyReceiver(t *testing.T, routingKey string) *receiver {
	return newReceiver(t, func(r *http.Request, body []byte) (map[string]any, error) {
		var m struct {
			RoutingKey  string `json:"routing_key"`
			EventAction string `json:"event_action"`
			DedupKey    string `json:"dedup_key"`
			Payload     struct {
				Summary, Source, Severity, Timestamp string
			} `json:"payload"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, err
		}
		if m.RoutingKey != routingKey || !slices.Contains([]string{"trigger", "acknowledge", "resolve"}, m.EventAction) || m.DedupKey == "" ||
			m.Payload.Summary == "" || m.Payload.Source == "" || m.Payload.Timestamp == "" ||
			!strings.Contains("critical error warning info", m.Payload.Severity) || m.Payload.Severity == "" {
			return nil, errf("pagerduty event %s", body)
		}
		if _, err := time.Parse(time.RFC3339Nano, m.Payload.Timestamp); err != nil {
			return nil, errf("pagerduty timestamp %q", m.Payload.Timestamp)
		}
		return map[string]any{"action": m.EventAction, "dedup": m.DedupKey, "summary": m.Payload.Summary}, nil
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func errf(format string, args ...any) error {
	b, _ := json.Marshal(args)
	return errString(format + " " + string(b))
}

// mailbox is a real SMTP server (emersion/go-smtp) on loopback.
type mailbox struct {
	addr string
	mu   sync.Mutex
	msgs []mailMsg
}

type mailMsg struct {
	from string
	to   []string
	data string
}

type mailSession struct {
	box *mailbox
	cur mailMsg
}

func (s *mailSession) Reset()        { s.cur = mailMsg{} }
func (s *mailSession) Logout() error { return nil }
func (s *mailSession) Mail(from string, _ *smtp.MailOptions) error {
	s.cur.from = from
	return nil
}
func (s *mailSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.cur.to = append(s.cur.to, to)
	return nil
}
func (s *mailSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.cur.data = string(b)
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, s.cur)
	s.box.mu.Unlock()
	return nil
}

type mailBackend struct{ box *mailbox }

func (b mailBackend) NewSession(*smtp.Conn) (smtp.Session, error) {
	return &mailSession{box: b.box}, nil
}

func startMailbox(t *testing.T) *mailbox {
	box := &mailbox{}
	srv := smtp.NewServer(mailBackend{box})
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	box.addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return box
}

func (b *mailbox) waitFor(t *testing.T, n int) []mailMsg {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.mu.Lock()
		msgs := append([]mailMsg(nil), b.msgs...)
		b.mu.Unlock()
		if len(msgs) >= n {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("mail: %d messages, want %d", len(msgs), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// scenarioAlerts: a lapse reaches a signed webhook, Slack, PagerDuty
// (trigger) and e-mail; a late fact resolves the PagerDuty incident with
// the same dedup key; the agent refusing every lapse task makes a
// delivery.dead; a failing VERIFY makes a verification.failed; a webhook
// receiver that is down at first gets each notification after, under one
// webhook-id; another tenant can neither see the channels nor attach
// rules to this agent.
func scenarioAlerts(t *testing.T) {
	box := startMailbox(t)
	e := startEnv(t, func(c *Config) {
		c.Notify.BaseBackoff, c.Notify.MaxBackoff, c.Notify.MaxAttempts = 50*time.Millisecond, 300*time.Millisecond, 40
		c.SMTP = &notify.SMTP{Addr: box.addr, From: "clockwork@example.com"}
	})
	ag := register(t, e, "1.0")
	ag.FailNext(1000, 500) // the agent is the broken thing: its lapse tasks die

	secret := alert.NewWebhookSecret()
	hook := webhookReceiver(t, secret)
	slack := slackReceiver(t)
	pd := pagerDutyReceiver(t, "R0UT1NGKEY")
	hook.setDown(true)

	// The webhook is the operator's own (not shared); the others are
	// shared, as an operator's channels are by default.
	e.must(201, e.call("PUT", "/v1/channels/ops-hook", map[string]any{"type": "webhook", "url": hook.srv.URL + "/hook", "secret": secret, "shared": false}))
	e.must(201, e.call("PUT", "/v1/channels/ops-slack", map[string]any{"type": "slack", "url": slack.srv.URL + "/services/T0/B0/xyz"}))
	e.must(201, e.call("PUT", "/v1/channels/ops-pd", map[string]any{"type": "pagerduty", "routingKey": "R0UT1NGKEY", "url": pd.srv.URL + "/v2/enqueue"}))
	e.must(201, e.call("PUT", "/v1/channels/ops-mail", map[string]any{"type": "email", "to": []string{"ops@example.com"}}))
	// EventBridge exists on AWS only.
	var busQueue string
	sentBefore := 0
	if e.aws {
		var bus string
		bus, busQueue = eventBusToQueue(t, "ops-bus-"+e.table)
		e.must(201, e.call("PUT", "/v1/channels/ops-bus", map[string]any{"type": "eventbridge", "eventBusName": bus}))
		sentBefore = sesSentCount(t)
	} else {
		hasErrorPath(t, e.must(400, e.call("PUT", "/v1/channels/ops-bus", map[string]any{"type": "eventbridge", "eventBusName": "default"})), "type")
	}
	// A generated secret is answered once; no answer carries a secret after.
	var gen map[string]any
	e.must(201, e.call("PUT", "/v1/channels/gen-hook", map[string]any{"type": "webhook", "url": hook.srv.URL + "/other"})).json(t, &gen)
	if s, _ := gen["secret"].(string); !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("generated secret not answered: %v", gen)
	}
	for _, path := range []string{"/v1/channels", "/v1/channels/ops-hook", "/v1/channels/ops-slack", "/v1/channels/ops-pd", "/v1/channels/gen-hook"} {
		body := string(e.must(200, e.call("GET", path, nil)).body)
		for _, secretText := range []string{secret, "R0UT1NGKEY", "/services/T0/B0/xyz", gen["secret"].(string)} {
			if strings.Contains(body, secretText) {
				t.Fatalf("GET %s shows a secret: %s", path, body)
			}
		}
	}
	// Bad input names the field and changes nothing.
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/channels/bad", map[string]any{"type": "pager"})), "type")
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"nope"}}}})), "rules[0].channels[0]")
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.late"}, "channels": []string{"ops-hook"}}}})), "rules[0].on[0]")

	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed", "expectation.recovered"}, "channels": []string{"ops-hook", "ops-slack", "ops-pd"}},
		map[string]any{"on": []string{"delivery.dead"}, "channels": []string{"ops-hook"}},
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"ops-mail"}, "kinds": []string{"payment"}, "lapses": []string{"overdue"}},
	}}))
	if e.aws {
		var rules map[string]any
		e.must(200, e.call("GET", "/v1/agents/"+agentID+"/alerts", nil)).json(t, &rules)
		list := rules["rules"].([]any)
		list = append(list, map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"ops-bus"}})
		e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": list}))
	}

	// Another tenant sees of the shared channels their id, type and name
	// only, nothing of the operator's own, and cannot attach rules here.
	// (The listing is a global index on DynamoDB, which may lag the
	// channels just made by a moment.)
	var list struct{ Channels []map[string]any }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		e.must(200, e.call("GET", "/v1/channels", nil, tenantB)).json(t, &list)
		if len(list.Channels) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("another tenant lists %v; want the shared channels", list.Channels)
		}
	}
	for _, c := range list.Channels {
		if c["channelId"] == "ops-hook" || c["shared"] != true || len(c) > 4 || c["url"] != nil || c["to"] != nil {
			t.Fatalf("another tenant lists %v", c)
		}
	}
	var shared map[string]any
	e.must(200, e.call("GET", "/v1/channels/ops-slack", nil, tenantB)).json(t, &shared)
	if shared["type"] != "slack" || shared["shared"] != true || len(shared) != 3 {
		t.Fatalf("another tenant reads the shared ops-slack as %v; want its id, type and sharing only", shared)
	}
	for _, call := range []struct{ method, path string }{{"PUT", "/v1/channels/ops-slack"}, {"POST", "/v1/channels/ops-slack/test"},
		{"DELETE", "/v1/channels/ops-slack"}, {"GET", "/v1/channels/ops-slack/deadletters"}, {"GET", "/v1/channels/ops-pd/deadletters"}} {
		var body any
		if call.method == "PUT" {
			body = map[string]any{"type": "slack", "url": "https://127.0.0.1:1/steal"}
		}
		e.must(404, e.call(call.method, call.path, body, tenantB))
	}
	e.must(404, e.call("GET", "/v1/channels/ops-hook", nil, tenantB))
	e.must(404, e.call("PUT", "/v1/channels/ops-hook", map[string]any{"type": "webhook", "url": "https://127.0.0.1:1/steal"}, tenantB))
	e.must(404, e.call("POST", "/v1/channels/ops-hook/test", nil, tenantB))
	e.must(404, e.call("DELETE", "/v1/channels/ops-hook", nil, tenantB))
	e.must(403, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{}}, tenantB))
	e.must(403, e.call("GET", "/v1/agents/"+agentID+"/notifications?expectationId=late", nil, tenantB))
	e.must(200, e.call("PUT", "/v1/agents/agent-b", a2atestCard(t), tenantB))
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/agent-b/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"ops-hook"}}}}, tenantB)), "rules[0].channels[0]")

	// A lapse reaches every channel; the webhook receiver is down for a
	// while first.
	start := time.Now()
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations", raiseBody(payment("late", ts(200*time.Millisecond)))))
	rec := e.waitRecord(agentID, "late", func(r *expect.Record) bool { return r.Lapse != nil })
	slack.waitFor("slack lapse", func(g []map[string]any) bool {
		return len(g) >= 1 && strings.Contains(g[0]["text"].(string), "late") && strings.Contains(g[0]["text"].(string), "overdue")
	})
	triggers := pd.waitFor("pagerduty trigger", func(g []map[string]any) bool { return len(g) >= 1 })
	if triggers[0]["action"] != "trigger" {
		t.Fatalf("pagerduty: %v", triggers[0])
	}
	if e.aws {
		// SES sent it (moto counts what it accepted), and the bus's rule
		// delivered the event with clockwork's source and the event type.
		deadline := time.Now().Add(30 * time.Second)
		for sesSentCount(t) <= sentBefore {
			if time.Now().After(deadline) {
				t.Fatal("SES sent no e-mail for the lapse")
			}
			time.Sleep(100 * time.Millisecond)
		}
		evs := receiveEvents(t, busQueue, func(g []map[string]any) bool { return len(g) >= 1 })
		detail, _ := evs[0]["detail"].(map[string]any)
		if evs[0]["source"] != alert.EventBridgeSource || evs[0]["detail-type"] != string(alert.Lapsed) || detail["type"] != string(alert.Lapsed) {
			t.Fatalf("EventBridge event: %v", evs[0])
		}
	} else {
		msgs := box.waitFor(t, 1)
		if !strings.Contains(msgs[0].data, "Subject: [clockwork] Expectation late") || msgs[0].to[0] != "ops@example.com" ||
			!strings.Contains(msgs[0].data, "invoice 42 is paid") {
			t.Fatalf("mail: %+v", msgs[0])
		}
	}
	time.Sleep(time.Second)
	hook.mu.Lock()
	refused := hook.refused
	hook.mu.Unlock()
	if refused == 0 {
		t.Fatal("the webhook receiver was never tried while down")
	}
	hook.setDown(false)
	got := hook.waitFor("webhook lapse and dead delivery", func(g []map[string]any) bool {
		return count(g, ofType(alert.Lapsed)) >= 1 && count(g, ofType(alert.DeliveryDead)) >= 1
	})
	t.Logf("lapse to webhook (receiver down ~1s first): %v", time.Since(start).Round(time.Millisecond))
	for _, m := range got {
		data := m["data"].(map[string]any)
		if data["agentId"] != agentID || data["record"] == nil {
			t.Fatalf("webhook payload: %v", m)
		}
		if m["type"] == string(alert.DeliveryDead) && data["reason"] == "" {
			t.Fatalf("delivery.dead without reason: %v", m)
		}
	}
	if rec.Lapse.Lapse != expect.Overdue {
		t.Fatalf("lapse %v", rec.Lapse)
	}

	// Someone on call acknowledges the lapse: the record says who, when
	// and why, the first acknowledgement stands, and PagerDuty's incident
	// is acknowledged (the trigger's dedup key). Another tenant, and a
	// token with neither expectations:write nor channels:write, cannot.
	e.must(403, e.call("POST", "/v1/agents/"+agentID+"/expectations/late/ack", map[string]any{"note": "mine"}, tenantB))
	e.must(403, e.call("POST", "/v1/agents/"+agentID+"/expectations/late/ack", nil, factsToken))
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/agents/"+agentID+"/expectations/late/ack", map[string]any{"note": strings.Repeat("x", 1001)})), "note")
	var acked expect.Record
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations/late/ack", map[string]any{"note": "calling the payment provider"})).json(t, &acked)
	if acked.Ack == nil || acked.Ack.By != "admin" || acked.Ack.Note != "calling the payment provider" || acked.Ack.At == "" {
		t.Fatalf("acknowledged record: %+v", acked.Ack)
	}
	var again expect.Record
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/expectations/late/ack", nil)).json(t, &again)
	if again.Ack == nil || *again.Ack != *acked.Ack {
		t.Fatalf("a second acknowledgement changed it: %+v", again.Ack)
	}
	acks := pd.waitFor("pagerduty acknowledge", func(g []map[string]any) bool {
		return count(g, func(m map[string]any) bool { return m["action"] == "acknowledge" }) >= 1
	})
	for _, m := range acks {
		if m["action"] == "acknowledge" && m["dedup"] != triggers[0]["dedup"] {
			t.Fatalf("acknowledge dedup %v, trigger %v", m["dedup"], triggers[0]["dedup"])
		}
	}
	hook.waitFor("webhook acknowledged", func(g []map[string]any) bool { return count(g, ofType(alert.Acknowledged)) == 1 })

	// A late fact resolves the incident, with the trigger's dedup key.
	e.must(200, e.call("POST", "/v1/agents/"+agentID+"/facts", map[string]any{"facts": []any{fact("invoice.42.late", ts(0))}}))
	resolved := pd.waitFor("pagerduty resolve", func(g []map[string]any) bool {
		return count(g, func(m map[string]any) bool { return m["action"] == "resolve" }) >= 1
	})
	for _, m := range resolved {
		if m["dedup"] != triggers[0]["dedup"] {
			t.Fatalf("resolve dedup %v, trigger %v", m["dedup"], triggers[0]["dedup"])
		}
	}
	hook.waitFor("webhook recovered", func(g []map[string]any) bool { return count(g, ofType(alert.Recovered)) >= 1 })

	// A failing VERIFY.
	plan := "plan-alert"
	var seedAgent string
	{
		var m map[string]any
		_ = json.Unmarshal(variant(t, "ant-alert", plan), &m)
		seedAgent = m["agent_id"].(string)
	}
	registerAs(t, e, seedAgent)
	e.must(200, e.call("PUT", "/v1/agents/"+seedAgent+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"verification.failed"}, "channels": []string{"ops-hook"}}}}))
	e.must(201, e.call("POST", "/v1/anticipations", variant(t, "ant-alert", plan)))
	runPlan(t, e, plan, 3, []string{"iam_create_user", "iam_remove_user"}, allGood())
	got = hook.waitFor("verification.failed", func(g []map[string]any) bool { return count(g, ofType(alert.VerificationFailed)) >= 1 })
	for _, m := range got {
		if m["type"] != string(alert.VerificationFailed) {
			continue
		}
		data := m["data"].(map[string]any)
		if data["planId"] != plan || data["anticipationId"] != "ant-alert" || data["verification"] == nil {
			t.Fatalf("verification.failed payload: %v", m)
		}
	}

	// Every webhook-id was accepted with one body, however often it came.
	hook.mu.Lock()
	for id, bodies := range hook.ids {
		for _, b := range bodies[1:] {
			if b != bodies[0] {
				t.Errorf("webhook-id %s came with two bodies", id)
			}
		}
	}
	hook.mu.Unlock()

	// The expectation's timeline lists its notifications (read from a
	// global index, which on DynamoDB, and so in the emulator, may lag the
	// latest ones a moment).
	var tl struct{ Notifications []alert.Notification }
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		e.must(200, e.call("GET", "/v1/agents/"+agentID+"/notifications?expectationId=late", nil)).json(t, &tl)
		if len(tl.Notifications) >= 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timeline: %d notifications", len(tl.Notifications))
		}
	}
	// The test route answers how it went (on AWS the API function sends it
	// itself: SES and EventBridge too).
	tested := []string{"ops-slack", "ops-mail"}
	if e.aws {
		tested = append(tested, "ops-bus")
	}
	for _, ch := range tested {
		var tr map[string]any
		e.must(200, e.call("POST", "/v1/channels/"+ch+"/test", nil)).json(t, &tr)
		if tr["delivered"] != true {
			t.Fatalf("test of %s: %v", ch, tr)
		}
	}
	var tr map[string]any
	e.must(200, e.call("POST", "/v1/channels/gen-hook/test", nil)).json(t, &tr)
	if tr["delivered"] != false || tr["error"] != "the receiver answered 400" {
		t.Fatalf("a failed test is an answer naming the failure: %v", tr)
	}
}

// a2atestCard is a card of a real SDK agent, for agents that only need one.
func a2atestCard(t *testing.T) []byte { return a2atest.NewAgent(t, "1.0").Card() }

// scenarioAlertsTenancy: what a second tenant tried (squatting a channel
// id, reading dead letters through an id deleted and taken again, quoted
// addresses, duplicate filters, a flood of tests, a forged page token)
// gets nothing of another's.
func scenarioAlertsTenancy(t *testing.T) {
	e := startEnv(t, func(c *Config) {
		c.Notify.BaseBackoff, c.Notify.MaxBackoff, c.Notify.MaxAttempts = 20*time.Millisecond, 50*time.Millisecond, 2
	})
	e.must(200, e.call("PUT", "/v1/agents/agent-a", a2atestCard(t), tenantA))
	e.must(200, e.call("PUT", "/v1/agents/agent-b", a2atestCard(t), tenantB))
	gone := newReceiver(t, func(*http.Request, []byte) (map[string]any, error) { return nil, errf("refused") })

	// B squats an id the operator then uses: the operator is told, not
	// silently given a channel B owns and can repoint.
	e.must(201, e.call("PUT", "/v1/channels/ops-pager", map[string]any{"type": "webhook", "url": gone.srv.URL}, tenantB))
	p := problem(t, e.must(409, e.call("PUT", "/v1/channels/ops-pager", map[string]any{"type": "pagerduty", "routingKey": "OPS-KEY", "url": gone.srv.URL})))
	if !strings.Contains(p["detail"].(string), "DELETE it first") {
		t.Fatalf("squatted id: %v", p)
	}
	var ch map[string]any
	e.must(200, e.call("GET", "/v1/channels/ops-pager", nil, tenantB)).json(t, &ch)
	if ch["type"] != "webhook" {
		t.Fatalf("B's channel changed: %v", ch)
	}

	// A's channel collects dead letters; A deletes it; B takes the id.
	e.must(201, e.call("PUT", "/v1/channels/a-hook", map[string]any{"type": "webhook", "url": gone.srv.URL}, tenantA))
	e.must(200, e.call("PUT", "/v1/agents/agent-a/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"a-hook"}}}}, tenantA))
	e.must(200, e.call("POST", "/v1/agents/agent-a/expectations", raiseBody(payment("a-1", ts(100*time.Millisecond))), tenantA))
	var dl struct {
		Notifications []alert.Notification
		Next          string
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(dl.Notifications) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("A's notification never dead-lettered")
		}
		time.Sleep(50 * time.Millisecond)
		e.must(200, e.call("GET", "/v1/channels/a-hook/deadletters", nil, tenantA)).json(t, &dl)
	}
	e.must(404, e.call("GET", "/v1/channels/a-hook/deadletters", nil, tenantB))
	e.must(204, e.call("DELETE", "/v1/channels/a-hook", nil, tenantA))
	e.must(201, e.call("PUT", "/v1/channels/a-hook", map[string]any{"type": "webhook", "url": gone.srv.URL}, tenantB))
	e.must(200, e.call("POST", "/v1/agents/agent-a/expectations", raiseBody(payment("a-2", ts(100*time.Millisecond))), tenantA))
	e.waitRecord("agent-a", "a-2", func(r *expect.Record) bool { return r.Lapse != nil })
	time.Sleep(time.Second) // the lapse's change has been processed by now
	body := e.must(200, e.call("GET", "/v1/channels/a-hook/deadletters?limit=1", nil, tenantB)).body
	if strings.Contains(string(body), "agent-a") || strings.Contains(string(body), `"next"`) || strings.Contains(string(body), "ntf_") {
		t.Fatalf("B reads A's dead letters through the id it took: %s", body)
	}
	hasErrorPath(t, e.must(400, e.call("GET", "/v1/channels/a-hook/deadletters?after=!!!", nil, tenantB)), "after")

	// A shared operator channel serves B's own rules: B's lapse reaches
	// it. A tenant cannot share a channel of its own.
	teamSlack := slackReceiver(t)
	e.must(201, e.call("PUT", "/v1/channels/team-slack", map[string]any{"type": "slack", "url": teamSlack.srv.URL + "/services/T0/B0/team", "name": "Team alerts"}))
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/channels/b-shared", map[string]any{"type": "webhook", "url": gone.srv.URL, "shared": true}, tenantB)), "shared")
	e.must(200, e.call("PUT", "/v1/agents/agent-b/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"team-slack"}}}}, tenantB))
	e.must(200, e.call("POST", "/v1/agents/agent-b/expectations", raiseBody(payment("b-shared-1", ts(100*time.Millisecond))), tenantB))
	teamSlack.waitFor("B's lapse on the shared channel", func(g []map[string]any) bool {
		return len(g) >= 1 && strings.Contains(g[0]["text"].(string), "b-shared-1")
	})
	// The operator stops sharing it: B's rule (written while it was
	// shared) no longer sends there.
	e.must(200, e.call("PUT", "/v1/channels/team-slack", map[string]any{"type": "slack", "url": teamSlack.srv.URL + "/services/T0/B0/team", "shared": false}))
	e.must(200, e.call("POST", "/v1/agents/agent-b/expectations", raiseBody(payment("b-shared-2", ts(100*time.Millisecond))), tenantB))
	e.waitRecord("agent-b", "b-shared-2", func(r *expect.Record) bool { return r.Lapse != nil })
	time.Sleep(time.Second) // the lapse's change has been processed by now
	var tl struct{ Notifications []alert.Notification }
	e.must(200, e.call("GET", "/v1/agents/agent-b/notifications?expectationId=b-shared-2", nil, tenantB)).json(t, &tl)
	if len(tl.Notifications) != 0 {
		t.Fatalf("B's lapse made notifications for a channel no longer shared: %+v", tl.Notifications)
	}
	teamSlack.mu.Lock()
	for _, m := range teamSlack.got {
		if strings.Contains(m["text"].(string), "b-shared-2") {
			t.Fatalf("the channel no longer shared got B's lapse: %v", m)
		}
	}
	teamSlack.mu.Unlock()
	e.must(200, e.call("PUT", "/v1/agents/agent-b/alerts", map[string]any{"rules": []any{}}, tenantB))

	// Addresses that an SMTP server would read as parameters or lists.
	for _, to := range []string{`"x@evil.com> NOTIFY=SUCCESS"@b.com`, `"a,b"@c.com`, "Ops <ops@example.com>", "a@b"} {
		hasErrorPath(t, e.must(400, e.call("PUT", "/v1/channels/m1", map[string]any{"type": "email", "to": []string{to}}, tenantB)), "to[0]")
	}
	// Filters listed twice.
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/agents/agent-b/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"ops-pager"}, "lapses": []string{"overdue", "overdue"}}}}, tenantB)), "rules[0].lapses[1]")
	// The agent listing's page token names only what the caller may see.
	e.must(200, e.call("PUT", "/v1/agents/agent-c", a2atestCard(t)))
	var ag struct {
		Agents    []map[string]any
		NextToken string
	}
	e.must(200, e.call("GET", "/v1/agents?limit=1", nil, tenantB)).json(t, &ag)
	for ag.NextToken != "" {
		for _, dec := range []func(string) ([]byte, error){base64.StdEncoding.DecodeString, base64.URLEncoding.DecodeString, base64.RawURLEncoding.DecodeString, base64.RawStdEncoding.DecodeString} {
			if b, err := dec(ag.NextToken); err == nil && (strings.Contains(string(b), "agent-a") || strings.Contains(string(b), "agent-c")) {
				t.Fatalf("tenant B's page token names another tenant's agent: %q", b)
			}
		}
		if len(ag.Agents) != 1 || ag.Agents[0]["agentId"] != "agent-b" {
			t.Fatalf("tenant B lists %v", ag.Agents)
		}
		next := ag.NextToken
		ag.Agents, ag.NextToken = nil, ""
		e.must(200, e.call("GET", "/v1/agents?limit=1&nextToken="+url.QueryEscape(next), nil, tenantB)).json(t, &ag)
		if len(ag.Agents) != 0 || ag.NextToken != "" {
			t.Fatalf("after agent-b, tenant B lists %v, next %q", ag.Agents, ag.NextToken)
		}
	}
	// Tests are paced.
	e.must(200, e.call("POST", "/v1/channels/ops-pager/test", nil, tenantB))
	r := e.must(429, e.call("POST", "/v1/channels/ops-pager/test", nil, tenantB))
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
}
