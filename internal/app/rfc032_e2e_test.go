package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evaluation"
)

// emit encodes an AIGP message the way an emitter writes it: its own field
// order and spacing, which the server keeps byte for byte.
func emit(t *testing.T, kv ...any) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString("{")
	for i := 0; i+1 < len(kv); i += 2 {
		v, err := json.Marshal(kv[i+1])
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %s", kv[i], v)
	}
	b.WriteString("}")
	return b.Bytes()
}

// scenarioRFC032Emitter: an emitter that speaks RFC-032 (message_type and
// protocol_version on every message, context fields the server does not
// interpret, TOOL_RESULT status in lower case) has its ANTICIPATE sealed
// and its execution chained and graded; everything it sent comes back
// unchanged and under the digests; event_type is refused with the fix.
func scenarioRFC032Emitter(t *testing.T) {
	e := startEnv(t)
	const plan, ant = "plan-rfc032", "ant-rfc032"
	// An ANTICIPATE with top-level context of its own, and one more
	// criterion: exactly one tool call failed.
	m := seedMessage(t)
	m["anticipation_id"], m["plan_id"] = ant, plan
	m["trace_id"] = "4bf92f3577b34da6a3ce929d0e0e4736"
	m["x_emitter"] = map[string]any{"name": "aigp-emitter", "version": "0.9.1"}
	ex := m["expectations"].(map[string]any)
	ex["trajectory_criteria"] = append(ex["trajectory_criteria"].([]any), map[string]any{
		"criterion_id": "tc-err", "description": "Exactly one tool call failed and was retried", "measurement": "DETERMINISTIC",
		"assertion": "error_count == 1", "weight": 0.5})
	declared := signed(t, m)
	var d evaluation.Declared
	e.must(201, e.call("POST", "/v1/anticipations", declared)).json(t, &d)

	// Unknown fields inside expectations or grading_policy stay refused,
	// and the error says why.
	inner := seedMessage(t)
	inner["anticipation_id"], inner["plan_id"] = "ant-inner", "plan-inner"
	inner["grading_policy"].(map[string]any)["curve"] = "lenient"
	r := e.must(400, e.call("POST", "/v1/anticipations", signed(t, inner)))
	hasErrorPath(t, r, "grading_policy.curve")
	if !strings.Contains(string(r.body), "could change what success means") {
		t.Fatalf("the refusal must say why: %s", r.body)
	}

	ts := func(s int) string {
		return time.Date(2026, 6, 24, 10, 0, s, 0, time.UTC).Format(time.RFC3339)
	}
	common := func(typ, id string, s int) []any {
		return []any{"protocol_version", "4.1", "message_type", typ, "event_id", id, "plan_id", plan,
			"agent_id", seedAgent, "session_id", "ses-xyz789", "timestamp", ts(s)}
	}
	ctx := func(span string, cost float64) []any {
		return []any{"trace_id", "4bf92f3577b34da6a3ce929d0e0e4736", "span_id", span, "model", "gpt-4.1-mini",
			"cost", map[string]any{"usd": cost, "tokens": map[string]any{"in": 812, "out": 64}}}
	}
	var sent [][]byte
	post := func(body []byte) evaluation.Appended {
		t.Helper()
		var a evaluation.Appended
		e.must(202, e.call("POST", "/v1/executions/"+plan+"/events", body)).json(t, &a)
		sent = append(sent, body)
		return a
	}

	// event_type, alone or beside message_type, is refused before anything
	// is stored, with a message that says to send message_type.
	legacy := emit(t, "event_id", "legacy-1", "event_type", "TOOL_REQUEST", "timestamp", ts(0), "tool", "iam_create_user")
	r = e.must(400, e.call("POST", "/v1/executions/"+plan+"/events", legacy))
	hasErrorPath(t, r, "event_type")
	if !strings.Contains(string(r.body), `send \"message_type\": \"TOOL_REQUEST\"`) {
		t.Fatalf("the refusal must say to send message_type: %s", r.body)
	}
	both := emit(t, append(common("TOOL_REQUEST", "legacy-2", 0), "event_type", "TOOL_REQUEST", "tool", "iam_create_user")...)
	hasErrorPath(t, e.must(400, e.call("POST", "/v1/executions/"+plan+"/events", both)), "event_type")
	var before struct{ Sealed bool }
	e.must(200, e.call("GET", "/v1/anticipations/"+ant, nil)).json(t, &before)
	if before.Sealed {
		t.Fatal("a refused event sealed the ANTICIPATE")
	}

	// The execution, as the emitter sends it: three tool calls, the second
	// failing once ("error") and retried; statuses in lower and mixed case.
	statuses := []string{"success", "error", "Success", "SUCCESS"}
	tools := []string{"iam_create_user", "iam_add_to_group", "iam_add_to_group", "iam_attach_policy"}
	step, s := 0, 1
	for i, tool := range tools {
		post(emit(t, append(append(common("TOOL_REQUEST", fmt.Sprintf("req-%d", i), s), "tool", tool,
			"arguments", map[string]any{"username": "alice", "group": "engineering"}), ctx(fmt.Sprintf("span-%d", i), 0.0011)...)...))
		if i == 0 {
			var got struct{ Sealed bool }
			e.must(200, e.call("GET", "/v1/anticipations/"+ant, nil)).json(t, &got)
			if !got.Sealed {
				t.Fatal("the first TOOL_REQUEST must seal the ANTICIPATE")
			}
		}
		post(emit(t, append(append(common("TOOL_RESULT", fmt.Sprintf("res-%d", i), s+1), "tool", tool,
			"status", statuses[i], "latency_ms", 41.5, "result", map[string]any{"ok": statuses[i] != "error"}), ctx(fmt.Sprintf("span-%d", i), 0)...)...))
		if statuses[i] != "error" {
			step++
			post(emit(t, append(common("STEP_COMPLETE", fmt.Sprintf("step-%d", step), s+2), "step_name", tool)...))
		}
		s += 3
	}
	post(emit(t, append(common("OUTCOME", "outcome", s), "variables", map[string]any{"target_username": "alice"},
		"observations", allGood(), "summary", "alice onboarded into engineering")...))
	done := post(emit(t, append(common("PLAN_COMPLETE", "done", s+1), "total_cost", map[string]any{"usd": 0.0044})...))

	// Graded: every criterion met, error_count counted "error" only.
	v := e.waitVerification(ant)
	if v.Verdict != anticipate.VerdictPass || v.Score != 1 {
		t.Fatalf("VERIFY: verdict %s score %v: %+v", v.Verdict, v.Score, v.Results)
	}
	for _, res := range v.Results {
		if res.Status != anticipate.StatusPass {
			t.Errorf("%s: %s (%s)", res.CriterionID, res.Status, res.Evidence)
		}
	}
	if v.ExecutionDigest != done.Digest || v.AnticipationDigest != d.Digest {
		t.Fatalf("VERIFY digests %s %s; want %s %s", v.AnticipationDigest, v.ExecutionDigest, d.Digest, done.Digest)
	}
	if err := anticipate.CheckSeal(&v); err != nil {
		t.Fatal(err)
	}

	// Every event comes back as sent (the same JSON value, extra fields
	// included) and the chain recomputes over it to the VERIFY's head.
	out := e.executionEvents(plan, 0)
	if len(out.Events) != len(sent) {
		t.Fatalf("%d events stored, %d sent", len(out.Events), len(sent))
	}
	var raws [][]byte
	var digests []string
	for i, ev := range out.Events {
		got, err1 := anticipate.Canonical(ev.Event)
		want, err2 := anticipate.Canonical(sent[i])
		if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("event %d came back as %s; sent %s", i, ev.Event, sent[i])
		}
		var typ struct {
			MessageType string `json:"message_type"`
		}
		_ = json.Unmarshal(sent[i], &typ)
		if ev.Type != typ.MessageType {
			t.Errorf("event %d listed as %q, sent as %q", i, ev.Type, typ.MessageType)
		}
		raws, digests = append(raws, ev.Event), append(digests, ev.Digest)
	}
	if !bytes.Contains(out.Events[0].Event, []byte(`"cost":{"tokens":{"in":812,"out":64},"usd":0.0011}`)) &&
		!bytes.Contains(out.Events[0].Event, []byte(`"cost":{"usd":0.0011,"tokens":{"in":812,"out":64}}`)) {
		t.Errorf("extra fields not returned: %s", out.Events[0].Event)
	}
	if i, ok := anticipate.VerifyChain(raws, digests); !ok || digests[len(digests)-1] != v.ExecutionDigest {
		t.Fatalf("chain breaks at %d (head %s, VERIFY %s)", i, digests[len(digests)-1], v.ExecutionDigest)
	}
	// Removing an extra field from an event breaks the chain there.
	tampered := append([][]byte(nil), raws...)
	tampered[1] = bytes.Replace(raws[1], []byte(`"latency_ms":41.5,`), nil, 1)
	if bytes.Equal(tampered[1], raws[1]) {
		t.Fatalf("test did not tamper: %s", raws[1])
	}
	if i, ok := anticipate.VerifyChain(tampered, digests); ok || i != 1 {
		t.Fatalf("removed extra field detected at %d, ok=%v", i, ok)
	}
	if out.Execution.Aggregate.ErrorCount != 1 {
		t.Errorf("error_count %d; want 1", out.Execution.Aggregate.ErrorCount)
	}

	// A retry of an event is recognised by its canonical form, extra fields
	// included: re-indented it answers as before; with one extra field
	// changed it is another body (409).
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, sent[0], "", "    ")
	var again evaluation.Appended
	e.must(202, e.call("POST", "/v1/executions/"+plan+"/events", pretty.Bytes())).json(t, &again)
	if again.Digest != out.Events[0].Digest || again.Seq != 1 {
		t.Fatalf("retry answered %+v; stored %s at 1", again, out.Events[0].Digest)
	}
	changed := bytes.Replace(sent[0], []byte(`"span_id": "span-0"`), []byte(`"span_id": "span-9"`), 1)
	if bytes.Equal(changed, sent[0]) {
		t.Fatalf("test did not change the event: %s", sent[0])
	}
	problem(t, e.must(409, e.call("POST", "/v1/executions/"+plan+"/events", changed)))

	// The ANTICIPATE comes back with its extra fields, under its digest.
	var a struct {
		Anticipation json.RawMessage
		Digest       string
	}
	e.must(200, e.call("GET", "/v1/anticipations/"+ant, nil)).json(t, &a)
	if dg, err := anticipate.Digest(a.Anticipation); err != nil || dg != v.AnticipationDigest {
		t.Fatalf("anticipation digest %s (%v); VERIFY says %s", dg, err, v.AnticipationDigest)
	}
	if !bytes.Contains(a.Anticipation, []byte(`"x_emitter":{"name":"aigp-emitter","version":"0.9.1"}`)) {
		t.Errorf("extra fields not returned: %s", a.Anticipation)
	}
}
