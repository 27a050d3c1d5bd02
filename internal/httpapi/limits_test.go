package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/httpapi"
)

// The limits of SECURITY.md "Limits", each exercised through the HTTP API
// exactly at the limit (accepted) and one past it (refused with
// application/problem+json naming the field, and changing nothing).
// SECURITY.md "Limits" points here: a limit added to the code belongs in
// both.

// limitEnv is what one limit case works in: its own agent (with a card),
// so that no case sees another's records.
type limitEnv struct {
	t     *testing.T
	h     http.Handler
	agent string
	vars  map[string]string // set by setup, read by the requests
}

func (l *limitEnv) agentPath(suffix string) string { return "/v1/agents/" + l.agent + suffix }

// call serves one request with the token that may do everything.
func (l *limitEnv) call(r limitReq) answer { return do(l.h, r.method, r.path, allToken, r.body) }

// must fails unless the request answers status.
func (l *limitEnv) must(status int, r limitReq) answer {
	l.t.Helper()
	a := l.call(r)
	if a.status != status {
		l.t.Fatalf("%s %.80s: status %d, want %d: %.400s", r.method, r.path, a.status, status, a.body)
	}
	return a
}

// record returns the agent's expectation with id, or nil when there is none.
func (l *limitEnv) record(id string) *expect.Record {
	l.t.Helper()
	a := l.call(limGet(l.agentPath("/expectations/" + id)))
	if a.status == http.StatusNotFound {
		return nil
	}
	if a.status != http.StatusOK {
		l.t.Fatalf("GET expectation %.40s: status %d: %.300s", id, a.status, a.body)
	}
	var r expect.Record
	if err := json.Unmarshal(a.body, &r); err != nil {
		l.t.Fatal(err)
	}
	return &r
}

// wantState checks the state of an expectation ("" for none).
func (l *limitEnv) wantState(id string, want expect.State) {
	l.t.Helper()
	got := expect.State("")
	if r := l.record(id); r != nil {
		got = r.State
	}
	if got != want {
		l.t.Errorf("expectation %.40s is %q, want %q", id, got, want)
	}
}

// anticipation returns the agent's anticipation record, or nil.
func (l *limitEnv) anticipation(id string) *struct{ Sealed bool } {
	l.t.Helper()
	a := l.call(limGet("/v1/anticipations/" + id))
	if a.status == http.StatusNotFound {
		return nil
	}
	if a.status != http.StatusOK {
		l.t.Fatalf("GET anticipation %.40s: status %d: %.300s", id, a.status, a.body)
	}
	var r struct{ Sealed bool }
	if err := json.Unmarshal(a.body, &r); err != nil {
		l.t.Fatal(err)
	}
	return &r
}

// events returns the stored events of a plan, every page of them (nil
// when it has no execution).
func (l *limitEnv) events(plan string) []json.RawMessage {
	l.t.Helper()
	var out []json.RawMessage
	next := ""
	for {
		a := l.call(limGet("/v1/executions/" + plan + "/events?nextToken=" + url.QueryEscape(next)))
		if a.status == http.StatusNotFound {
			return nil
		}
		if a.status != http.StatusOK {
			l.t.Fatalf("GET events of %.40s: status %d: %.300s", plan, a.status, a.body)
		}
		var r struct {
			Events    []json.RawMessage
			NextToken string
		}
		if err := json.Unmarshal(a.body, &r); err != nil {
			l.t.Fatal(err)
		}
		out = append(out, r.Events...)
		if r.NextToken == "" {
			return out
		}
		next = r.NextToken
	}
}

// verification waits for the VERIFY of an anticipation and returns it.
func (l *limitEnv) verification(antID string) anticipate.Verification {
	l.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a := l.must(200, limGet("/v1/anticipations/"+antID+"/verifications"))
		var vs struct{ Verifications []anticipate.Verification }
		if err := json.Unmarshal(a.body, &vs); err != nil {
			l.t.Fatal(err)
		}
		if len(vs.Verifications) > 0 {
			return vs.Verifications[0]
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("no VERIFY for %s", antID)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type limitReq struct {
	method, path string
	body         []byte
}

func limGet(path string) limitReq                  { return limitReq{"GET", path, nil} }
func limPost(path string, body []byte) limitReq    { return limitReq{"POST", path, body} }
func limPostJSON(path string, v any) limitReq      { return limPost(path, mustJSON(v)) }
func limPutJSON(path string, body []byte) limitReq { return limitReq{"PUT", path, body} }

// limitCase is one limit. past is sent first and must be refused with
// status, naming field (with msg in its message) or, when fieldless, with
// msg in the problem's detail; unchanged then checks that it changed
// nothing. at must then be accepted with ok (200 when 0), and accepted
// checks its effect.
type limitCase struct {
	name      string
	setup     func(l *limitEnv)
	past      func(l *limitEnv) limitReq
	status    int
	field     string
	fieldless bool
	msg       string
	unchanged func(l *limitEnv)
	at        func(l *limitEnv) limitReq
	ok        int
	accepted  func(l *limitEnv)
}

// Bodies of the watcher's API.

const limFarDue = "2099-12-01T09:00:00Z"

func limExp(id string) map[string]any { return expectationJSON(id, "limits.fact", limFarDue) }

func limWithField(e map[string]any, k string, v any) map[string]any {
	e[k] = v
	return e
}

func limRaise(exps ...map[string]any) map[string]any {
	list := make([]any, len(exps))
	for i, e := range exps {
		list[i] = e
	}
	return map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": list}
}

func limExps(prefix string, n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = limExp(fmt.Sprintf("%s-%d", prefix, i))
	}
	return out
}

func limIds(prefix string, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func limFact(key string, observedAt string) map[string]any {
	return map[string]any{"factKey": key, "observedAt": observedAt}
}

func limFactsBody(fs ...map[string]any) map[string]any {
	list := make([]any, len(fs))
	for i, f := range fs {
		list[i] = f
	}
	return map[string]any{"facts": list}
}

func limManyFacts(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = limFact(fmt.Sprintf("limits.fact.%d", i), "2026-01-01T00:00:00Z")
	}
	return out
}

// a2aMessage is an A2A message carrying one extension block.
func limA2aMessage(block map[string]any) map[string]any {
	return map[string]any{"message": map[string]any{"messageId": "m-1", "taskId": "task-1", "contextId": "ctx-1", "metadata": a2aMeta(block)}}
}

// Bodies of the evaluation loop's API.

func limDetCriterion(id, src string) map[string]any {
	return map[string]any{"criterion_id": id, "description": "A deterministic check", "measurement": "DETERMINISTIC", "assertion": src, "weight": 1}
}

func limCriteria(prefix string, n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = limDetCriterion(fmt.Sprintf("%s-%d", prefix, i), "step_count >= 0")
	}
	return out
}

// signedAnticipation returns a signed ANTICIPATE; fields override or add
// top-level members (expectations included).
func limSignedAnticipation(agentID, antID, plan string, fields map[string]any) []byte {
	m := map[string]any{
		"protocol_version": "4.1", "message_type": "ANTICIPATE", "app_id": "app-1", "agent_id": agentID,
		"anticipation_id": antID, "plan_id": plan, "scope_envelope_id": "scope-limits", "session_id": "ses-1",
		"timestamp":      "2026-06-24T10:00:00Z",
		"expectations":   map[string]any{"outcome_criteria": []any{limDetCriterion("oc-1", "step_count >= 0")}},
		"grading_policy": map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": false},
	}
	for k, v := range fields {
		m[k] = v
	}
	out, err := anticipate.Sign(mustJSON(m))
	if err != nil {
		panic(err)
	}
	return out
}

func limOutcomeCriteria(cs ...any) map[string]any {
	return map[string]any{"expectations": map[string]any{"outcome_criteria": cs}}
}

func limEvent(id, typ string, fields map[string]any) map[string]any {
	m := map[string]any{"event_id": id, "message_type": typ, "timestamp": "2026-06-24T10:00:01Z"}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

// limKept returns n fields no part of the server interprets.
func limKept(n int) map[string]any {
	m := map[string]any{}
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("x_%03d", i)] = i
	}
	return m
}

func limVariables(n int) map[string]any {
	m := map[string]any{}
	for i := 0; i < n; i++ {
		m[fmt.Sprintf("v%d", i)] = i
	}
	return m
}

func limObservations(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"call": "f", "args": []any{i}, "value": true}
	}
	return out
}

// declare declares an anticipation of the case's agent bound to plan.
func (l *limitEnv) declare(antID, plan string, fields map[string]any) {
	l.t.Helper()
	l.must(201, limPost("/v1/anticipations", limSignedAnticipation(l.agent, antID, plan, fields)))
}

// assertionOfNodes returns a valid assertion of exactly n syntax nodes (n
// even): NOT, false, and (n-2)/2 times "&& true".
func limAssertionOfNodes(n int) string {
	return "!false" + strings.Repeat(" && true", (n-2)/2)
}

// concatAssertion is a costly but legal assertion of exactly
// assertion.MaxNodes nodes: 255 copies of the variable v concatenated,
// compared and negated.
func limConcatAssertion(v string) string {
	return "!(" + v + strings.Repeat(" + "+v, 254) + " == '')"
}

// nested returns depth levels of nested arrays.
func limNested(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + strings.Repeat("]", depth))
}

// padTo pads a JSON body with trailing white space to exactly n bytes.
func limPadTo(b []byte, n int) []byte {
	if len(b) > n {
		panic("body already longer than the padding target")
	}
	return append(b, strings.Repeat(" ", n-len(b))...)
}

func limitCases() []limitCase { return append(watcherLimitCases(), evaluationLimitCases()...) }

// wantProblem checks a refusal: status, problem+json, and either a field
// error on field whose message contains msg or, when fieldless, msg in the
// detail.
func wantLimitProblem(t *testing.T, a answer, status int, field, msg string, fieldless bool) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %.400s", a.status, status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type %q, want application/problem+json", ct)
	}
	var p httpapi.Problem
	if err := json.Unmarshal(a.body, &p); err != nil {
		t.Fatalf("problem: %v: %.300s", err, a.body)
	}
	if p.Status != status {
		t.Errorf("problem status %d, want %d", p.Status, status)
	}
	if fieldless {
		if !strings.Contains(p.Detail, msg) {
			t.Errorf("detail %q does not mention %q", p.Detail, msg)
		}
		return
	}
	for _, e := range p.Errors {
		if e.Path == field && strings.Contains(e.Message, msg) {
			return
		}
	}
	t.Errorf("no error on %q mentioning %q: %.600s", field, msg, a.body)
}

// afterCase is the limit on the names of one expectation's after list:
// 50 earlier expectations of the same subject.
func limitAfterCase(maxN int) limitCase {
	after := func(n int) map[string]any { return limWithField(limExp("late"), "after", limIds("p", n)) }
	return limitCase{
		name: "after names per expectation",
		setup: func(l *limitEnv) {
			l.must(200, limPostJSON(l.agentPath("/expectations"), limRaise(limExps("p", maxN)...)))
			l.must(200, limPostJSON(l.agentPath("/expectations"), limRaise(limExp(fmt.Sprintf("p-%d", maxN)))))
		},
		past: func(l *limitEnv) limitReq {
			return limPostJSON(l.agentPath("/expectations"), limRaise(after(maxN+1)))
		},
		status: 400, field: "expectations[0].after", msg: "more than 50",
		unchanged: func(l *limitEnv) { l.wantState("late", "") },
		at: func(l *limitEnv) limitReq {
			return limPostJSON(l.agentPath("/expectations"), limRaise(after(maxN)))
		},
		accepted: func(l *limitEnv) { l.wantState("late", expect.StateOpen) },
	}
}

func TestLimits(t *testing.T) {
	ap := startApp(t)
	for i, c := range limitCases() {
		t.Run(c.name, func(t *testing.T) {
			l := &limitEnv{t: t, h: ap.Handler, agent: fmt.Sprintf("limits-%02d", i), vars: map[string]string{}}
			l.must(200, limPutJSON(l.agentPath(""), card()))
			if c.setup != nil {
				c.setup(l)
			}
			past := c.past(l)
			wantLimitProblem(t, l.call(past), c.status, c.field, c.msg, c.fieldless)
			if c.unchanged != nil {
				c.unchanged(l)
			}
			ok := c.ok
			if ok == 0 {
				ok = 200
			}
			l.must(ok, c.at(l))
			if c.accepted != nil {
				c.accepted(l)
			}
		})
	}
}

// TestLimitsBodyEveryRoute sends a body one byte past the limit to every
// route that reads one: each answers 413 before reading further.
func TestLimitsBodyEveryRoute(t *testing.T) {
	ap := startApp(t)
	body := limPadTo([]byte("{}"), httpapi.DefaultMaxBody+1)
	for _, r := range []limitReq{
		{"PUT", "/v1/agents/" + agent, body},
		{"POST", "/v1/agents/" + agent + "/expectations", body},
		{"POST", "/v1/agents/" + agent + "/facts", body},
		{"POST", "/v1/agents/" + agent + "/withdrawals", body},
		{"POST", "/v1/agents/" + agent + "/a2a", body},
		{"POST", "/v1/anticipations", body},
		{"PUT", "/v1/anticipations/ant-1", body},
		{"POST", "/v1/executions/plan-1/events", body},
		{"POST", "/v1/verifications/vrf-1/grades", body},
	} {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			wantLimitProblem(t, do(ap.Handler, r.method, r.path, allToken, r.body), 413, "", fmt.Sprint(httpapi.DefaultMaxBody), true)
		})
	}
	if a := do(ap.Handler, "GET", "/v1/agents/"+agent, allToken, nil); a.status != 404 {
		t.Errorf("GET card after a refused PUT: status %d, want 404", a.status)
	}
}
