// Package a2atest runs a real A2A agent for tests: the official A2A Go SDK's
// server (a2asrv) with an AgentExecutor that records every message it
// receives and completes the task, served over JSON-RPC on 127.0.0.1 by
// httptest. A "1.0" agent speaks A2A 1.0 (SendMessage); a "0.3" agent is
// served through the SDK's 0.3 compat JSON-RPC handler (a2acompat/a2av0,
// message/send).
package a2atest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/agentclock/clockwork/internal/expect"
)

// LapseSkill is the lapse skill the test agent's card declares.
const LapseSkill = "handle-lapse"

// RPCPath is the path of the agent's JSON-RPC endpoint; CardPath serves
// Card().
const (
	RPCPath  = "/a2a"
	CardPath = "/.well-known/agent-card.json"
)

// Received is one message the agent's executor received.
type Received struct {
	MessageID        string
	ContextID        string
	ReferenceTaskIDs []string
	Extensions       []string
	// ExtensionHeader is the A2A-Extensions request header as seen on the
	// wire (values joined with ", ").
	ExtensionHeader string
	// LegacyExtensionHeader is the X-A2A-Extensions request header (the
	// 0.3 spelling) as seen on the wire.
	LegacyExtensionHeader string
	// Metadata is the message's metadata as the SDK server decoded it.
	Metadata map[string]any
	// Role is the message's role as the SDK server decoded it.
	Role string
	// Text is the concatenated text parts.
	Text string
	// TaskID is the id of the task the agent created and returned.
	TaskID string
	// User is the user the SDK's call context carried (set by the agent's
	// authentication interceptor when it requires credentials).
	User string
}

// Agent is a running test agent. Its methods are safe for concurrent use.
type Agent struct {
	t       testing.TB
	version string
	srv     *httptest.Server

	mu         sync.Mutex
	received   []Received
	headers    map[string][]http.Header // by messageId, oldest first
	failN      int
	failStatus int
	// failEvery, when positive, fails every failEvery-th request with
	// failEveryStatus (FailEvery).
	failEvery, failEveryStatus int
	delay                      time.Duration
	requests                   int
	changed                    chan struct{}
	security                   []Security
	refused                    int
	// seq numbers the messages the agent sends itself (StartTask).
	seq int
}

// NewAgent starts an agent speaking version ("1.0" or "0.3") on 127.0.0.1
// and stops it when the test ends. An unknown version fails the test.
func NewAgent(t testing.TB, version string) *Agent {
	t.Helper()
	return newAgent(t, version, httptest.NewServer)
}

func newAgent(t testing.TB, version string, serve func(http.Handler) *httptest.Server) *Agent {
	t.Helper()
	a := &Agent{t: t, version: version, headers: map[string][]http.Header{}, changed: make(chan struct{})}
	// Push notifications as the SDK sends them (tests' webhooks are on
	// loopback, which its guard refuses by default).
	handler := a2asrv.NewHandler(&executor{agent: a}, a2asrv.WithLogger(slog.New(slog.DiscardHandler)),
		a2asrv.WithCallInterceptors(authInterceptor{agent: a}),
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second, AllowPrivateNetworks: true})))
	var rpc http.Handler
	switch version {
	case "1.0":
		rpc = a2asrv.NewJSONRPCHandler(handler)
	case "0.3":
		rpc = a2av0.NewJSONRPCHandler(handler)
	default:
		t.Fatalf("a2atest: unknown A2A version %q (want 1.0 or 0.3)", version)
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CardPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(a.Card())
	})
	mux.Handle(RPCPath, a.middleware(a.authenticate(rpc)))
	a.srv = serve(mux)
	t.Cleanup(a.srv.Close)
	return a
}

// Close stops the agent now (NewAgent also stops it when the test ends);
// later requests to its URL are refused. Calling it twice is harmless.
func (a *Agent) Close() { a.srv.Close() }

// Version returns the A2A version the agent speaks.
func (a *Agent) Version() string { return a.version }

// URL returns the agent's JSON-RPC endpoint URL (http://127.0.0.1:port/a2a).
func (a *Agent) URL() string { return a.srv.URL + RPCPath }

// CardURL returns the URL at which the agent serves Card().
func (a *Agent) CardURL() string { return a.srv.URL + CardPath }

// Card returns the agent's card as JSON, in the agent's version's format: a
// 1.0 card (supportedInterfaces, built from the SDK's a2a.AgentCard) or a
// pure 0.3 card (url, protocolVersion "0.3.0", preferredTransport). It
// declares the expectations extension with keepsTime false, lapseSkill
// "handle-lapse" and the kinds "payment" (subjectType "invoice") and
// "shipment" (subjectType "order", skills ["fulfil"]); its skills are
// handle-lapse, fulfil and extraSkills.
func (a *Agent) Card(extraSkills ...string) []byte {
	skills := []a2a.AgentSkill{
		{ID: LapseSkill, Name: "Handle lapse", Description: "Acts on a lapsed expectation.", Tags: []string{"expectations"}},
		{ID: "fulfil", Name: "Fulfil order", Description: "Fulfils an order.", Tags: []string{"orders"}},
	}
	for _, s := range extraSkills {
		skills = append(skills, a2a.AgentSkill{ID: s, Name: s, Description: "Test skill " + s + ".", Tags: []string{"test"}})
	}
	ext := a2a.AgentExtension{
		URI:         expect.URI,
		Description: "Raises expectations on invoices and orders.",
		Params: map[string]any{
			"keepsTime":  false,
			"lapseSkill": LapseSkill,
			"kinds": []any{
				map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "The customer pays the invoice.", "basis": "contract"},
				map[string]any{"kind": "shipment", "subjectType": "order", "describes": "The warehouse ships the order.", "basis": "observed", "skills": []any{"fulfil"}},
			},
		},
	}
	card := a2a.AgentCard{
		Name:               "a2atest agent",
		Description:        "A test agent that records lapse tasks.",
		Version:            "1.0.0",
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Capabilities:       a2a.AgentCapabilities{Extensions: []a2a.AgentExtension{ext}, PushNotifications: true},
		Skills:             skills,
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: a.URL(), ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.Version},
		},
	}
	var v any = card
	if a.version == "0.3" {
		v = map[string]any{
			"name":               card.Name,
			"description":        card.Description,
			"version":            card.Version,
			"protocolVersion":    "0.3.0",
			"url":                a.URL(),
			"preferredTransport": "JSONRPC",
			"defaultInputModes":  card.DefaultInputModes,
			"defaultOutputModes": card.DefaultOutputModes,
			"capabilities":       map[string]any{"extensions": []a2a.AgentExtension{ext}, "pushNotifications": true},
			"skills":             skills,
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		a.t.Errorf("a2atest: encode card: %v", err)
		return nil
	}
	return a.withSecurity(b)
}

// Received returns a copy of the messages received so far, oldest first.
func (a *Agent) Received() []Received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.received)
}

// Requests returns how many HTTP requests reached the JSON-RPC endpoint,
// including failed ones.
func (a *Agent) Requests() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests
}

// WaitFor waits until at least n messages were received or timeout passed,
// and returns the messages received so far (fewer than n on timeout).
func (a *Agent) WaitFor(n int, timeout time.Duration) []Received {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		a.mu.Lock()
		if len(a.received) >= n {
			out := slices.Clone(a.received)
			a.mu.Unlock()
			return out
		}
		changed := a.changed
		a.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return a.Received()
		}
	}
}

// FailNext makes the agent answer the next n JSON-RPC requests with the
// HTTP status (and a short text body) without processing them.
func (a *Agent) FailNext(n int, status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failN, a.failStatus = n, status
}

// FailEvery makes the agent answer every k-th JSON-RPC request with the
// HTTP status (k <= 0: none), as an agent with intermittent failures does:
// a sender's retries, spread over whatever else happens, still deliver.
func (a *Agent) FailEvery(k int, status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failEvery, a.failEveryStatus = k, status
}

// SetDelay makes the agent wait d before handling each JSON-RPC request
// (or until the client gives up).
func (a *Agent) SetDelay(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.delay = d
}

// middleware applies fault injection, remembers the extension headers of
// each message by messageId for the executor, and echoes the activated
// extension in the response header as the extension's profile requires.
func (a *Agent) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.requests++
		delay := a.delay
		fail := 0
		if a.failN > 0 {
			a.failN--
			fail = a.failStatus
		} else if a.failEvery > 0 && a.requests%a.failEvery == 0 {
			fail = a.failEveryStatus
		}
		a.mu.Unlock()

		// Read the body before any delay: only then does the server watch
		// the connection and cancel the request when the client gives up.
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, "a2atest: read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if delay > 0 {
			timer := time.NewTimer(delay)
			select {
			case <-timer.C:
			case <-r.Context().Done():
				timer.Stop()
				return
			}
		}
		if fail != 0 {
			http.Error(w, "a2atest: injected failure", fail)
			return
		}

		var env struct {
			Params struct {
				Message struct {
					MessageID string `json:"messageId"`
				} `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &env) == nil && env.Params.Message.MessageID != "" {
			id := env.Params.Message.MessageID
			a.mu.Lock()
			a.headers[id] = append(a.headers[id], r.Header.Clone())
			a.mu.Unlock()
		}
		requested := strings.Join(append(r.Header.Values("A2A-Extensions"), r.Header.Values("X-A2A-Extensions")...), ",")
		if strings.Contains(requested, expect.URI) {
			w.Header().Set("A2A-Extensions", expect.URI)
		}
		next.ServeHTTP(w, r)
	})
}

// record stores what the executor received and wakes WaitFor.
func (a *Agent) record(execCtx *a2asrv.ExecutorContext) {
	msg := execCtx.Message
	rec := Received{TaskID: string(execCtx.TaskID)}
	if execCtx.User != nil && execCtx.User.Authenticated {
		rec.User = execCtx.User.Name
	}
	if msg != nil {
		rec.MessageID = msg.ID
		rec.ContextID = msg.ContextID
		rec.Extensions = slices.Clone(msg.Extensions)
		rec.Metadata = msg.Metadata
		rec.Role = string(msg.Role)
		for _, id := range msg.ReferenceTasks {
			rec.ReferenceTaskIDs = append(rec.ReferenceTaskIDs, string(id))
		}
		var text []string
		for _, p := range msg.Parts {
			if p != nil && p.Text() != "" {
				text = append(text, p.Text())
			}
		}
		rec.Text = strings.Join(text, "\n")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if hs := a.headers[rec.MessageID]; len(hs) > 0 {
		rec.ExtensionHeader = strings.Join(hs[0].Values("A2A-Extensions"), ", ")
		rec.LegacyExtensionHeader = strings.Join(hs[0].Values("X-A2A-Extensions"), ", ")
		if len(hs) == 1 {
			delete(a.headers, rec.MessageID)
		} else {
			a.headers[rec.MessageID] = hs[1:]
		}
	}
	a.received = append(a.received, rec)
	close(a.changed)
	a.changed = make(chan struct{})
}

// executor records each message, creates a task and completes it.
type executor struct {
	agent *Agent
}

// Execute implements a2asrv.AgentExecutor. Besides lapse messages (each
// a task completed at once), it runs the tasks StartTask starts: a message
// "hold" leaves its task waiting for input, and a follow-up "complete",
// "fail" or "reject" ends it so (FinishTask).
func (e *executor) Execute(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := messageText(execCtx.Message)
		held := text == holdText || execCtx.StoredTask != nil && slices.Contains([]string{"complete", "fail", "reject"}, text)
		if !held {
			e.agent.record(execCtx)
		}
		if execCtx.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(execCtx, execCtx.Message), nil) {
				return
			}
		}
		if held {
			state := map[string]a2a.TaskState{holdText: a2a.TaskStateInputRequired, "complete": a2a.TaskStateCompleted, "fail": a2a.TaskStateFailed, "reject": a2a.TaskStateRejected}[text]
			yield(a2a.NewStatusUpdateEvent(execCtx, state, nil), nil)
			return
		}
		reply := a2a.NewMessageForTask(a2a.MessageRoleAgent, execCtx, a2a.NewTextPart("lapse handled"))
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCompleted, reply), nil)
	}
}

// Cancel implements a2asrv.AgentExecutor.
func (e *executor) Cancel(ctx context.Context, execCtx *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(execCtx, a2a.TaskStateCanceled, nil), nil)
	}
}

// holdText is the message that starts a held task (StartTask).
const holdText = "hold"

func messageText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var text []string
	for _, p := range m.Parts {
		if p != nil && p.Text() != "" {
			text = append(text, p.Text())
		}
	}
	return strings.Join(text, "\n")
}

// StartTask has the agent start a task that waits for input (a message
// "hold" sent as any client would) and returns its id: a task another
// agent can watch, which FinishTask ends. Such messages are not counted
// in Received.
func (a *Agent) StartTask(t testing.TB) string {
	t.Helper()
	return a.message(t, "", holdText)
}

// FinishTask ends a task StartTask started: outcome "complete", "fail" or
// "reject".
func (a *Agent) FinishTask(t testing.TB, taskID, outcome string) {
	t.Helper()
	if got := a.message(t, taskID, outcome); got != taskID {
		t.Fatalf("a2atest: finishing task %s answered task %q", taskID, got)
	}
}

// message sends one user message with text to the agent's own endpoint,
// in its protocol version's JSON-RPC (as a client would), continuing task
// taskID when set, and returns the task id of the answer.
func (a *Agent) message(t testing.TB, taskID, text string) string {
	t.Helper()
	a.mu.Lock()
	a.seq++
	id := fmt.Sprintf("a2atest-%d", a.seq)
	a.mu.Unlock()
	var body map[string]any
	if a.version == "0.3" {
		msg := map[string]any{"kind": "message", "messageId": id, "role": "user", "parts": []any{map[string]any{"kind": "text", "text": text}}}
		if taskID != "" {
			msg["taskId"] = taskID
		}
		body = map[string]any{"jsonrpc": "2.0", "id": id, "method": "message/send", "params": map[string]any{"message": msg}}
	} else {
		msg := map[string]any{"messageId": id, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}
		if taskID != "" {
			msg["taskId"] = taskID
		}
		body = map[string]any{"jsonrpc": "2.0", "id": id, "method": "SendMessage", "params": map[string]any{"message": msg}}
	}
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, a.URL(), bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if a.version == "0.3" {
		req.Header.Set("A2A-Version", "0.3")
	} else {
		req.Header.Set("A2A-Version", "1.0")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("a2atest: message to the agent: %v", err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	var rr struct {
		Result map[string]any  `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(out, &rr); err != nil || rr.Result == nil {
		t.Fatalf("a2atest: message to the agent answered %d %s", res.StatusCode, out)
	}
	// 0.3: the task itself; 1.0: {"task": {...}} or the task.
	task := rr.Result
	if inner, ok := rr.Result["task"].(map[string]any); ok {
		task = inner
	}
	got, _ := task["id"].(string)
	if got == "" {
		got, _ = task["taskId"].(string)
	}
	if got == "" {
		t.Fatalf("a2atest: the agent's answer names no task: %s", out)
	}
	return got
}
