// Command schemathesis seeds a running clockwork server with data for the
// schemathesis run of .ci/schemathesis.sh, so that the generated requests
// reach records that exist and not only 404s: agent-1's card, expectations
// in each state, an unsealed and a sealed ANTICIPATE, an execution with its
// event chain and a PENDING VERIFY. It prints the ids as a schemathesis
// configuration (dictionaries bound to the path parameters) on stdout.
//
// It talks only to the server given by -url, which must be on loopback.
//
//	go run ./internal/tools/schemathesis -url http://127.0.0.1:18080 -token TOKEN > schemathesis.toml
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
)

func main() {
	base := flag.String("url", "http://127.0.0.1:18080", "server base URL (loopback only)")
	token := flag.String("token", "", "bearer token with every scope")
	wait := flag.Duration("wait", 60*time.Second, "how long to wait for the server")
	flag.Parse()
	s, err := newSeeder(*base, *token)
	if err == nil {
		err = s.waitReady(*wait)
	}
	var ids seeded
	if err == nil {
		ids, err = s.seed()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
	fmt.Print(ids.config())
}

type seeder struct {
	base, token string
	client      *http.Client
}

func newSeeder(base, token string) (*seeder, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("-url %s is not on loopback", base)
	}
	if token == "" {
		return nil, errors.New("-token is required")
	}
	return &seeder{base: strings.TrimRight(base, "/"), token: token, client: &http.Client{Timeout: 10 * time.Second}}, nil
}

func (s *seeder) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		res, err := s.client.Get(s.base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("server at %s not ready after %s: %v", s.base, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// call sends a request and decodes a 2xx answer into out; other statuses
// are errors unless listed in ok.
func (s *seeder) call(method, path string, body any, out any, ok ...int) (int, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		for _, c := range ok {
			if c == res.StatusCode {
				return res.StatusCode, nil
			}
		}
		return res.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return res.StatusCode, fmt.Errorf("%s %s: %v", method, path, err)
		}
	}
	return res.StatusCode, nil
}

// Agent is the seeded agent.
const Agent = "agent-1"

// Card returns agent-1's card. Its JSON-RPC endpoint is a closed port on
// loopback and it keeps its own time, so no lapse task leaves the server.
func Card() map[string]any {
	return map[string]any{
		"name": "Billing agent", "description": "Chases invoices", "version": "1.0.0",
		"supportedInterfaces": []any{map[string]any{"url": "http://127.0.0.1:9/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}},
		"capabilities": map[string]any{"extensions": []any{map[string]any{"uri": expect.URI, "params": map[string]any{
			"keepsTime": true, "lapseSkill": "handle-lapse",
			"kinds": []any{
				map[string]any{"kind": "payment", "subjectType": "invoice", "describes": "An issued invoice is paid", "basis": "contract"},
				map[string]any{"kind": "shipment", "subjectType": "order", "describes": "The warehouse ships the order", "basis": "observed"},
			}}}}},
		"skills":            []any{map[string]any{"id": "handle-lapse", "name": "Handle lapse", "description": "Acts on a lapsed expectation", "tags": []any{"lapse"}}},
		"defaultInputModes": []any{"text/plain"}, "defaultOutputModes": []any{"text/plain"},
	}
}

func expectation(id, factKey, due string) map[string]any {
	return map[string]any{"expectationId": id, "kind": "payment", "subject": map[string]any{"type": "invoice", "id": "42"},
		"expects": "invoice 42 is paid", "satisfiedBy": map[string]any{"factKey": factKey}, "dueAt": due, "basis": "contract"}
}

// Anticipation returns a signed ANTICIPATE of agent-1 for plan, with one
// DETERMINISTIC and one HUMAN criterion, so that its VERIFY stays PENDING
// until a grade is submitted, and a top-level trace_id the server keeps.
func Anticipation(id, plan string) ([]byte, error) {
	m := map[string]any{
		"protocol_version": "4.1", "message_type": "ANTICIPATE", "app_id": "app-1", "agent_id": Agent,
		"anticipation_id": id, "plan_id": plan, "scope_envelope_id": "scope-1", "session_id": "ses-1",
		"timestamp": "2026-06-24T10:00:00Z",
		"expectations": map[string]any{
			"outcome_criteria": []any{
				map[string]any{"criterion_id": "oc-1", "description": "The user exists", "measurement": "DETERMINISTIC", "assertion": "user_exists('alice')", "weight": 1},
				map[string]any{"criterion_id": "hc-1", "description": "A reviewer approves the change", "measurement": "HUMAN", "assertion": "The change is what was asked for", "weight": 1},
			},
			"anti_criteria": []any{
				map[string]any{"criterion_id": "ac-1", "description": "No user is removed", "measurement": "DETERMINISTIC", "assertion": "tool_invoked('iam_remove_user') == false", "weight": 1},
			},
		},
		"grading_policy": map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": true},
		"trace_id":       "4bf92f3577b34da6a3ce929d0e0e4736", // kept and signed, not interpreted
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return anticipate.Sign(raw)
}

type seeded struct {
	agents, expectations, anticipations, plans, verifications, criteria []string
}

func (s *seeder) seed() (seeded, error) {
	var out seeded
	if _, err := s.call("PUT", "/v1/agents/"+Agent, Card(), nil); err != nil {
		return out, err
	}
	out.agents = []string{Agent}
	now := time.Now().UTC()
	raise := map[string]any{"taskId": "task-1", "contextId": "ctx-1", "expectations": []any{
		expectation("exp-open", "invoice.42.paid", "2099-12-01T09:00:00Z"),
		expectation("exp-satisfied", "invoice.42.sent", "2099-12-01T09:00:00Z"),
		expectation("exp-withdrawn", "invoice.42.disputed", "2099-12-01T09:00:00Z"),
		expectation("exp-lapsed", "invoice.42.refunded", expect.FormatTime(now.Add(time.Second))),
	}}
	if _, err := s.call("POST", "/v1/agents/"+Agent+"/expectations", raise, nil); err != nil {
		return out, err
	}
	facts := map[string]any{"facts": []any{map[string]any{"factKey": "invoice.42.sent", "observedAt": expect.FormatTime(now)}}}
	if _, err := s.call("POST", "/v1/agents/"+Agent+"/facts", facts, nil); err != nil {
		return out, err
	}
	if _, err := s.call("POST", "/v1/agents/"+Agent+"/withdrawals", map[string]any{"withdraw": []any{"exp-withdrawn"}}, nil); err != nil {
		return out, err
	}
	out.expectations = []string{"exp-open", "exp-satisfied", "exp-withdrawn", "exp-lapsed"}

	// An unsealed anticipation (its plan has not begun) and a sealed one
	// whose plan completed.
	open, err := Anticipation("ant-open", "plan-open")
	if err != nil {
		return out, err
	}
	if _, err := s.call("POST", "/v1/anticipations", open, nil, 200); err != nil {
		return out, err
	}
	done, err := Anticipation("ant-1", "plan-1")
	if err != nil {
		return out, err
	}
	if _, err := s.call("POST", "/v1/anticipations", done, nil, 200); err != nil {
		return out, err
	}
	out.anticipations = []string{"ant-1", "ant-open"}
	events := []map[string]any{
		// RFC-032 messages as an emitter sends them: protocol_version and
		// context fields the server keeps without interpreting them.
		{"protocol_version": "4.1", "event_id": "ev-1", "message_type": "TOOL_REQUEST", "timestamp": "2026-06-24T10:00:01Z", "tool": "iam_create_user", "arguments": map[string]any{"user": "alice"},
			"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "cost": map[string]any{"usd": 0.0011}},
		{"protocol_version": "4.1", "event_id": "ev-2", "message_type": "TOOL_RESULT", "timestamp": "2026-06-24T10:00:02Z", "tool": "iam_create_user", "status": "success"},
		{"event_id": "ev-3", "message_type": "STEP_COMPLETE", "timestamp": "2026-06-24T10:00:03Z"},
		{"event_id": "ev-4", "message_type": "OUTCOME", "timestamp": "2026-06-24T10:00:04Z", "variables": map[string]any{"target_username": "alice"},
			"observations": []any{map[string]any{"call": "user_exists", "args": []any{"alice"}, "value": true}}},
		{"event_id": "ev-5", "message_type": "PLAN_COMPLETE", "timestamp": "2026-06-24T10:00:05Z"},
	}
	for _, ev := range events {
		if _, err := s.call("POST", "/v1/executions/plan-1/events", ev, nil, 200); err != nil {
			return out, err
		}
	}
	out.plans = []string{"plan-1", "plan-open"}
	// VERIFY runs from the change feed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var vs struct {
			Verifications []struct {
				VerificationID string `json:"verification_id"`
			} `json:"verifications"`
		}
		if _, err := s.call("GET", "/v1/anticipations/ant-1/verifications", nil, &vs); err != nil {
			return out, err
		}
		if len(vs.Verifications) > 0 {
			out.verifications = []string{vs.Verifications[0].VerificationID}
			break
		}
		if time.Now().After(deadline) {
			return out, errors.New("no VERIFY for plan-1 after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	out.criteria = []string{"hc-1", "oc-1"}
	// The lapse of exp-lapsed is decided on the watcher's clock.
	for {
		var rec expect.Record
		if _, err := s.call("GET", "/v1/agents/"+Agent+"/expectations/exp-lapsed", nil, &rec); err != nil {
			return out, err
		}
		if rec.State == expect.StateLapsed {
			break
		}
		if time.Now().After(deadline) {
			return out, errors.New("exp-lapsed did not lapse after 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	return out, nil
}

// config renders a schemathesis.toml that makes half of the generated path
// parameters name the seeded records.
func (ids seeded) config() string {
	var b strings.Builder
	b.WriteString("# Generated by internal/tools/schemathesis: the records seeded on the server.\n")
	dict := func(name string, values []string) {
		q := make([]string, len(values))
		for i, v := range values {
			q[i] = fmt.Sprintf("%q", v)
		}
		fmt.Fprintf(&b, "\n[dictionaries.%s]\nvalues = [%s]\n", name, strings.Join(q, ", "))
	}
	dict("agents", ids.agents)
	dict("expectations", ids.expectations)
	dict("anticipations", ids.anticipations)
	dict("plans", ids.plans)
	dict("verifications", ids.verifications)
	dict("criteria", ids.criteria)
	b.WriteString("\n[parameters]\n")
	for _, p := range [][2]string{
		{"path.agentId", "agents"}, {"path.expectationId", "expectations"}, {"path.id", "anticipations"},
		{"path.planId", "plans"}, {"path.verificationId", "verifications"}, {"body.criterion_id", "criteria"},
	} {
		fmt.Fprintf(&b, "%q = { dictionary = %q, probability = 0.5 }\n", p[0], p[1])
	}
	return b.String()
}
