// Package evidencetest builds evidence bundles the way the server does, and
// tampers with them in every way a test of an offline verifier needs.
package evidencetest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evidence"
)

// TypeField is the member that names an execution event's type.
const TypeField = "message_type"

// SeedAnticipation is the seed's ANTICIPATE (RFC-032 section 3.1) with its
// placeholder signature; Build signs it.
const SeedAnticipation = `{
  "protocol_version": "4.1",
  "message_type": "ANTICIPATE",
  "app_id": "APP_PRJ",
  "agent_id": "agent-gandalf-spell-executor-001",
  "anticipation_id": "ant-20260624-001",
  "plan_id": "plan-abc123",
  "scope_envelope_id": "scope-env-001",
  "session_id": "ses-xyz789",
  "timestamp": "2026-06-24T10:00:00Z",
  "expectations": {
    "outcome_criteria": [
      {"criterion_id": "oc-001", "description": "IAM user created successfully with correct group membership",
       "measurement": "DETERMINISTIC", "assertion": "user_exists(target_username) AND group_member(target_username, 'engineering')", "weight": 1.0},
      {"criterion_id": "oc-002", "description": "No permissions beyond engineering group baseline",
       "measurement": "DETERMINISTIC", "assertion": "policy_count(target_username) <= group_policy_count('engineering')", "weight": 0.8}
    ],
    "trajectory_criteria": [
      {"criterion_id": "tc-001", "description": "Complete within 3 tool invocations",
       "measurement": "DETERMINISTIC", "assertion": "step_count <= 3", "weight": 0.5},
      {"criterion_id": "tc-002", "description": "No escalation required for standard onboarding",
       "measurement": "DETERMINISTIC", "assertion": "escalation_count == 0", "weight": 0.3}
    ],
    "anti_criteria": [
      {"criterion_id": "ac-001", "description": "Must not invoke iam_remove_user during onboarding",
       "measurement": "DETERMINISTIC", "assertion": "tool_invoked('iam_remove_user') == false", "weight": 1.0}
    ]
  },
  "grading_policy": {"grader_type": "CODE", "passing_threshold": 0.7, "weighted_scoring": true, "fail_on_any_anti_criteria": true},
  "d_dna_signature": "sha256:..."
}`

// Event returns an execution event of the given type with its other
// members, in the wire form the server accepts.
func Event(id, typ string, at time.Time, members ...any) map[string]any {
	e := map[string]any{"protocol_version": "4.1", "event_id": id, TypeField: typ, "timestamp": at.UTC().Format(time.RFC3339Nano)}
	for i := 0; i+1 < len(members); i += 2 {
		e[members[i].(string)] = members[i+1]
	}
	return e
}

// SeedEvents returns n (at least 3) events of the seed's plan: TOOL_REQUEST,
// TOOL_RESULT and STEP_COMPLETE in turn, then an OUTCOME that satisfies the
// outcome criteria, then PLAN_COMPLETE.
func SeedEvents(n int) []map[string]any {
	if n < 3 {
		n = 3
	}
	t0 := time.Date(2026, 6, 24, 10, 0, 1, 0, time.UTC)
	out := make([]map[string]any, 0, n)
	for i := 0; i < n-2; i++ {
		at := t0.Add(time.Duration(i) * time.Second)
		id := fmt.Sprintf("ev-%06d", i)
		switch i % 3 {
		case 0:
			out = append(out, Event(id, "TOOL_REQUEST", at, "tool", "iam_create_user", "arguments", map[string]any{"username": "alice", "note": "<welcome & onboard>"}))
		case 1:
			out = append(out, Event(id, "TOOL_RESULT", at, "tool", "iam_create_user", "status", "SUCCESS"))
		default:
			out = append(out, Event(id, "STEP_COMPLETE", at))
		}
	}
	obs := func(call string, value any, args ...any) map[string]any {
		return map[string]any{"call": call, "args": args, "value": value}
	}
	end := t0.Add(time.Duration(n) * time.Second)
	out = append(out, Event("ev-outcome", "OUTCOME", end, "variables", map[string]any{"target_username": "alice"},
		"observations", []any{obs("user_exists", true, "alice"), obs("group_member", true, "alice", "engineering"),
			obs("policy_count", 3, "alice"), obs("group_policy_count", 3, "engineering")}))
	out = append(out, Event("ev-done", "PLAN_COMPLETE", end.Add(time.Second)))
	return out
}

// Build returns the evidence bundle of the seed's ANTICIPATE graded over
// SeedEvents(n), computed as the server computes it (chain, VERIFY, and
// with key a server_signature; key nil leaves the VERIFY unsigned).
func Build(n int, key ed25519.PrivateKey) ([]byte, error) {
	ant, err := anticipate.Sign([]byte(SeedAnticipation))
	if err != nil {
		return nil, err
	}
	return BuildFrom(ant, SeedEvents(n), key)
}

// BuildFrom returns the evidence bundle of a signed ANTICIPATE graded over
// the given events of its plan.
func BuildFrom(antRaw []byte, events []map[string]any, key ed25519.PrivateKey) ([]byte, error) {
	a, err := anticipate.Validate(antRaw)
	if err != nil {
		return nil, err
	}
	var agg anticipate.Aggregate
	chain := make([]evidence.Event, 0, len(events))
	prev := anticipate.GenesisDigest
	for i, m := range events {
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		ev, err := evidence.ParseEvent(raw)
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		if err := ev.BindPlan(a.PlanID); err != nil {
			return nil, err
		}
		agg.Add(ev)
		d := anticipate.ChainDigest(prev, raw)
		chain = append(chain, evidence.Event{Seq: i + 1, Prev: prev, Digest: d, Event: raw})
		prev = d
	}
	v := anticipate.Grade(a, a.Programs(), agg.Env(nil), nil, anticipate.Execution{PlanID: a.PlanID, ExecutionDigest: prev},
		time.Date(2026, 6, 24, 11, 0, 0, 0, time.UTC))
	var pub *evidence.PublicKey
	if key != nil {
		if err := anticipate.SignEd25519(&v, key); err != nil {
			return nil, err
		}
		pub = &evidence.PublicKey{Alg: evidence.KeyAlg, PublicKey: base64.RawURLEncoding.EncodeToString(key.Public().(ed25519.PublicKey))}
	}
	vraw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w, err := evidence.NewWriter(&buf, antRaw, vraw, pub)
	if err != nil {
		return nil, err
	}
	for _, e := range chain {
		if err := w.Event(e); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
