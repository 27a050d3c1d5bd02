package a2aout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/retry"
)

func testLapse() expect.Lapse {
	return expect.Lapse{
		ExpectationID:  "exp-42",
		Kind:           "payment",
		Subject:        expect.Subject{Type: "invoice", ID: "inv-42"},
		Expects:        "Invoice 42 is paid",
		Lapse:          expect.Overdue,
		ProjectedDueAt: "2026-09-01T09:00:00Z",
		DueAt:          "2026-09-01T09:00:00Z",
		LapsedAt:       "2026-09-01T11:00:00Z",
		LastFactAt:     "2026-08-30T10:00:00Z",
		Lineage:        1,
	}
}

func testMessage() Message {
	l := testLapse()
	return Message{
		MessageID:       MessageID(l.ExpectationID, l.Lapse, l.DueAt),
		ContextID:       "ctx-origin",
		ReferenceTaskID: "task-origin",
		Lapse:           l,
	}
}

// localSender may reach the loopback test agents.
func localSender(timeout time.Duration) *Sender {
	return NewSender(Options{HTTPClient: netguard.NewHTTPClient(netguard.Guard{AllowPrivate: true}, 0), Timeout: timeout})
}

func parseAgentCard(t *testing.T, agent *a2atest.Agent) expect.Card {
	t.Helper()
	card, err := expect.ParseCard("agent-1", agent.Card("extra"))
	if err != nil {
		t.Fatalf("ParseCard: %v", err)
	}
	if card.ProtocolVersion != agent.Version() || card.URL != agent.URL() {
		t.Fatalf("card = %s at %s, want %s at %s", card.ProtocolVersion, card.URL, agent.Version(), agent.URL())
	}
	return card
}

func TestSend(t *testing.T) {
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			agent := a2atest.NewAgent(t, version)
			card := parseAgentCard(t, agent)
			m := testMessage()

			taskID, err := localSender(5*time.Second).Send(context.Background(), card, m)
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if taskID == "" {
				t.Fatal("no task id returned")
			}
			got := agent.WaitFor(1, 5*time.Second)
			if len(got) != 1 {
				t.Fatalf("agent received %d messages, want 1", len(got))
			}
			r := got[0]
			if r.MessageID != m.MessageID {
				t.Errorf("messageId = %q, want %q", r.MessageID, m.MessageID)
			}
			if r.ContextID != "ctx-origin" {
				t.Errorf("contextId = %q", r.ContextID)
			}
			if !reflect.DeepEqual(r.ReferenceTaskIDs, []string{"task-origin"}) {
				t.Errorf("referenceTaskIds = %q", r.ReferenceTaskIDs)
			}
			if !reflect.DeepEqual(r.Extensions, []string{expect.URI}) {
				t.Errorf("extensions = %q", r.Extensions)
			}
			if r.ExtensionHeader != expect.URI {
				t.Errorf("A2A-Extensions header = %q", r.ExtensionHeader)
			}
			if version == "0.3" && r.LegacyExtensionHeader != expect.URI {
				t.Errorf("X-A2A-Extensions header = %q", r.LegacyExtensionHeader)
			}
			if r.Role != string(a2a.MessageRoleUser) {
				t.Errorf("role = %q", r.Role)
			}
			if !strings.Contains(r.Text, "exp-42") || !strings.Contains(r.Text, "overdue") {
				t.Errorf("text = %q", r.Text)
			}
			if r.TaskID != taskID {
				t.Errorf("agent created task %q, Send returned %q", r.TaskID, taskID)
			}

			ext, ok := r.Metadata[expect.URI].(map[string]any)
			if !ok {
				t.Fatalf("metadata = %#v", r.Metadata)
			}
			if ext["skill"] != a2atest.LapseSkill {
				t.Errorf("metadata skill = %#v", ext["skill"])
			}
			b, err := json.Marshal(ext["lapse"])
			if err != nil {
				t.Fatal(err)
			}
			var lapse expect.Lapse
			if err := json.Unmarshal(b, &lapse); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(lapse, m.Lapse) {
				t.Errorf("metadata lapse = %+v, want %+v", lapse, m.Lapse)
			}
		})
	}
}

func TestSendSameMessageIDTwice(t *testing.T) {
	agent := a2atest.NewAgent(t, "1.0")
	card := parseAgentCard(t, agent)
	s := localSender(5 * time.Second)
	l := testLapse()
	m1 := testMessage()
	m2 := testMessage() // a duplicate built independently
	m2.MessageID = MessageID(l.ExpectationID, l.Lapse, l.DueAt)
	for _, m := range []Message{m1, m2} {
		if _, err := s.Send(context.Background(), card, m); err != nil {
			t.Fatalf("Send: %v", err)
		}
	}
	got := agent.WaitFor(2, 5*time.Second)
	if len(got) != 2 {
		t.Fatalf("received %d, want 2", len(got))
	}
	if got[0].MessageID != got[1].MessageID || got[0].MessageID != m1.MessageID {
		t.Fatalf("message ids %q and %q differ", got[0].MessageID, got[1].MessageID)
	}
}

func TestMessageID(t *testing.T) {
	a := MessageID("exp-1", expect.Overdue, "2026-09-01T09:00:00Z")
	if a != MessageID("exp-1", expect.Overdue, "2026-09-01T09:00:00Z") {
		t.Fatal("MessageID is not deterministic")
	}
	if len(a) != 36 || a[14] != '5' {
		t.Fatalf("MessageID %q is not a version 5 UUID", a)
	}
	others := []string{
		MessageID("exp-2", expect.Overdue, "2026-09-01T09:00:00Z"),
		MessageID("exp-1", expect.Stalled, "2026-09-01T09:00:00Z"),
		MessageID("exp-1", expect.Overdue, "2026-09-01T10:00:00Z"),
		MessageID("exp-1overdue", "", "2026-09-01T09:00:00Z"),
		MessageID("exp-1", "overdue2026-09-01T09:00:00Z", ""),
	}
	seen := map[string]bool{a: true}
	for _, o := range others {
		if seen[o] {
			t.Fatalf("MessageID collision: %q", o)
		}
		seen[o] = true
	}
}

func TestSendRetryClassification(t *testing.T) {
	agent := a2atest.NewAgent(t, "1.0")
	card := parseAgentCard(t, agent)

	t.Run("500 is transient and the retry succeeds", func(t *testing.T) {
		agent.FailNext(1, http.StatusInternalServerError)
		s := localSender(5 * time.Second)
		_, err := s.Send(context.Background(), card, testMessage())
		if err == nil {
			t.Fatal("Send succeeded against an injected 500")
		}
		var se *StatusError
		if !errors.As(err, &se) || se.StatusCode != http.StatusInternalServerError {
			t.Fatalf("error %v is not a 500 StatusError", err)
		}
		if Permanent(err) {
			t.Fatalf("500 classified permanent: %v", err)
		}
		taskID, err := s.Send(context.Background(), card, testMessage())
		if err != nil || taskID == "" {
			t.Fatalf("retry: %q, %v", taskID, err)
		}
	})

	t.Run("404 is permanent", func(t *testing.T) {
		agent.FailNext(1, http.StatusNotFound)
		_, err := localSender(5*time.Second).Send(context.Background(), card, testMessage())
		if !Permanent(err) {
			t.Fatalf("404 classified transient: %v", err)
		}
	})

	t.Run("429 is transient", func(t *testing.T) {
		agent.FailNext(1, http.StatusTooManyRequests)
		_, err := localSender(5*time.Second).Send(context.Background(), card, testMessage())
		if err == nil || Permanent(err) {
			t.Fatalf("429: %v (permanent=%v)", err, Permanent(err))
		}
	})

	t.Run("refused address is permanent", func(t *testing.T) {
		before := agent.Requests()
		_, err := NewSender(Options{}).Send(context.Background(), card, testMessage())
		if !errors.Is(err, netguard.ErrRefused) {
			t.Fatalf("error %v does not match netguard.ErrRefused", err)
		}
		if !Permanent(err) {
			t.Fatalf("refused address classified transient: %v", err)
		}
		if agent.Requests() != before {
			t.Fatal("the default guard let a request reach the loopback agent")
		}
	})

	t.Run("timeout is transient", func(t *testing.T) {
		agent.SetDelay(2 * time.Second)
		defer agent.SetDelay(0)
		start := time.Now()
		_, err := localSender(200*time.Millisecond).Send(context.Background(), card, testMessage())
		if err == nil {
			t.Fatal("Send succeeded despite the delay")
		}
		if time.Since(start) > 1500*time.Millisecond {
			t.Fatalf("Send took %v, timeout not applied", time.Since(start))
		}
		if Permanent(err) {
			t.Fatalf("timeout classified permanent: %v", err)
		}
	})

	t.Run("version mismatch is a permanent JSON-RPC error", func(t *testing.T) {
		wrong := card
		wrong.ProtocolVersion = "0.3" // message/send to a 1.0 agent
		_, err := localSender(5*time.Second).Send(context.Background(), wrong, testMessage())
		if !errors.Is(err, a2a.ErrMethodNotFound) {
			t.Fatalf("error %v does not match a2a.ErrMethodNotFound", err)
		}
		if !Permanent(err) {
			t.Fatalf("method not found classified transient: %v", err)
		}
	})

	t.Run("connection refused is transient", func(t *testing.T) {
		dead := a2atest.NewAgent(t, "1.0")
		deadCard := parseAgentCard(t, dead)
		u, _ := url.Parse(dead.URL())
		dead.Close() // the port now refuses connections
		_, err := localSender(2*time.Second).Send(context.Background(), deadCard, testMessage())
		if err == nil {
			t.Fatalf("Send to closed %s succeeded", u.Host)
		}
		if Permanent(err) {
			t.Fatalf("connection refused classified permanent: %v", err)
		}
	})
}

func TestSendInvalid(t *testing.T) {
	agent := a2atest.NewAgent(t, "1.0")
	card := parseAgentCard(t, agent)
	s := localSender(time.Second)
	tests := []struct {
		name   string
		card   func(expect.Card) expect.Card
		msg    func(Message) Message
		field  string
		before int
	}{
		{"no version", func(c expect.Card) expect.Card { c.ProtocolVersion = ""; return c }, nil, "protocolVersion", 0},
		{"bad url", func(c expect.Card) expect.Card { c.URL = "ftp://x/y"; return c }, nil, "url", 0},
		{"relative url", func(c expect.Card) expect.Card { c.URL = "/a2a"; return c }, nil, "url", 0},
		{"no message id", nil, func(m Message) Message { m.MessageID = ""; return m }, "messageId", 0},
		{"no context", nil, func(m Message) Message { m.ContextID = " "; return m }, "contextId", 0},
		{"no origin task", nil, func(m Message) Message { m.ReferenceTaskID = ""; return m }, "referenceTaskIds[0]", 0},
		{"no skill", func(c expect.Card) expect.Card { c.Declaration.LapseSkill = ""; return c }, nil, "metadata.skill", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, m := card, testMessage()
			if tt.card != nil {
				c = tt.card(c)
			}
			if tt.msg != nil {
				m = tt.msg(m)
			}
			before := agent.Requests()
			_, err := s.Send(context.Background(), c, m)
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != errs.Invalid {
				t.Fatalf("error %v is not Invalid", err)
			}
			if len(e.Fields) == 0 || e.Fields[0].Path != tt.field {
				t.Fatalf("fields = %+v, want %s", e.Fields, tt.field)
			}
			if !Permanent(err) {
				t.Fatal("invalid input classified transient")
			}
			if agent.Requests() != before {
				t.Fatal("an invalid message was sent")
			}
		})
	}

	var nilSender *Sender
	if _, err := nilSender.Send(context.Background(), card, testMessage()); err == nil {
		t.Fatal("nil Sender sent")
	}
	if _, err := (&Sender{}).Send(context.Background(), card, testMessage()); err == nil {
		t.Fatal("zero Sender sent")
	}
}

func TestSendExplicitSkillAndText(t *testing.T) {
	agent := a2atest.NewAgent(t, "0.3")
	card := parseAgentCard(t, agent)
	m := testMessage()
	m.Skill = "extra"
	m.Text = "Please chase invoice 42."
	if _, err := localSender(5*time.Second).Send(context.Background(), card, m); err != nil {
		t.Fatal(err)
	}
	r := agent.WaitFor(1, 5*time.Second)
	if len(r) != 1 || r[0].Text != m.Text || r[0].Metadata[expect.URI].(map[string]any)["skill"] != "extra" {
		t.Fatalf("received %+v", r)
	}
}

func TestNewSenderKeepsCallerClient(t *testing.T) {
	c := &http.Client{}
	NewSender(Options{HTTPClient: c})
	if c.Transport != nil {
		t.Fatal("NewSender modified the caller's client")
	}
}

func TestPermanent(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("outer: %w", err) }
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"refused", wrap(&netguard.RefusedError{Reason: "loopback"}), true},
		{"too many redirects", wrap(netguard.ErrTooManyRedirects), true},
		{"invalid", wrap(errs.E(errs.Invalid, "bad card")), true},
		{"unavailable app error", wrap(errs.E(errs.Unavailable, "down")), false},
		{"400", wrap(&StatusError{StatusCode: 400}), true},
		{"401", wrap(&StatusError{StatusCode: 401}), true},
		{"403", wrap(&StatusError{StatusCode: 403}), true},
		{"404", wrap(&StatusError{StatusCode: 404}), true},
		{"408", wrap(&StatusError{StatusCode: 408}), false},
		{"425", wrap(&StatusError{StatusCode: 425}), false},
		{"429", wrap(&StatusError{StatusCode: 429}), false},
		{"500", wrap(&StatusError{StatusCode: 500}), false},
		{"502", wrap(&StatusError{StatusCode: 502}), false},
		{"503", wrap(&StatusError{StatusCode: 503}), false},
		{"304", wrap(&StatusError{StatusCode: 304}), false},
		{"rpc method not found", wrap(a2a.NewError(a2a.ErrMethodNotFound, "nope")), true},
		{"rpc invalid params", wrap(a2a.NewError(a2a.ErrInvalidParams, "bad")), true},
		{"rpc parse error", wrap(a2a.ErrParseError), true},
		{"rpc unauthenticated", wrap(a2a.ErrUnauthenticated), true},
		{"rpc internal", wrap(a2a.NewError(a2a.ErrInternalError, "boom")), false},
		{"rpc server error", wrap(a2a.ErrServerError), false},
		{"bad agent response", wrap(a2a.ErrInvalidAgentResponse), false},
		{"deadline", wrap(context.DeadlineExceeded), false},
		{"canceled", wrap(context.Canceled), false},
		{"plain", errors.New("connection reset by peer"), false},
	}
	for _, tt := range tests {
		if got := Permanent(tt.err); got != tt.want {
			t.Errorf("%s: Permanent(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 9, 1, 9, 0, 0, 0, time.UTC)
	tests := map[string]time.Duration{
		"":                              0,
		"120":                           2 * time.Minute,
		"-5":                            0,
		"999999":                        24 * time.Hour,
		"junk":                          0,
		"Tue, 01 Sep 2026 09:00:30 GMT": 30 * time.Second,
		"Tue, 01 Sep 2026 08:00:00 GMT": 0,
	}
	for in, want := range tests {
		if got := retry.ParseRetryAfter(in, now); got != want {
			t.Errorf("retry.ParseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}

// rawAgent answers every request with body (HTTP 200, JSON).
func rawAgent(t *testing.T, body string) expect.Card {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return expect.Card{AgentID: "raw", URL: srv.URL, ProtocolVersion: "1.0", Declaration: expect.Declaration{LapseSkill: "s"}}
}

func TestSendMessageAnswer(t *testing.T) {
	card := rawAgent(t, `{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"m","role":"ROLE_AGENT","taskId":"task-from-message","parts":[{"text":"ok"}]}}}`)
	id, err := localSender(time.Second).Send(context.Background(), card, testMessage())
	if err != nil || id != "task-from-message" {
		t.Fatalf("Send = %q, %v", id, err)
	}
	card = rawAgent(t, `{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"ok"}]}}}`)
	id, err = localSender(time.Second).Send(context.Background(), card, testMessage())
	if err != nil || id != "" {
		t.Fatalf("Send = %q, %v", id, err)
	}
}

func TestSendBadResponses(t *testing.T) {
	huge := `{"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_SUBMITTED"},"metadata":{"pad":"` +
		strings.Repeat("x", MaxResponseBytes) + `"}}}}`
	for name, body := range map[string]string{
		"oversized":     huge,
		"not JSON":      "<html>oops</html>",
		"empty":         "",
		"no result":     `{"jsonrpc":"2.0","id":"1"}`,
		"rpc internal":  `{"jsonrpc":"2.0","id":"1","error":{"code":-32603,"message":"boom"}}`,
		"unknown event": `{"jsonrpc":"2.0","id":"1","result":{"weird":{}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := localSender(2*time.Second).Send(context.Background(), rawAgent(t, body), testMessage())
			if err == nil {
				t.Fatal("Send succeeded")
			}
			if Permanent(err) {
				t.Fatalf("classified permanent: %v", err)
			}
		})
	}
	_, err := localSender(2*time.Second).Send(context.Background(),
		rawAgent(t, `{"jsonrpc":"2.0","id":"1","error":{"code":-32602,"message":"bad params"}}`), testMessage())
	if !errors.Is(err, a2a.ErrInvalidParams) || !Permanent(err) {
		t.Fatalf("invalid params: %v (permanent=%v)", err, Permanent(err))
	}
}
