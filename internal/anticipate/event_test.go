package anticipate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/errs"
)

func TestSealsOn(t *testing.T) {
	want := map[EventType]bool{ToolRequest: true, StepComplete: true, ToolResult: false, Escalation: false,
		Outcome: false, PlanComplete: false, "": false, "tool_request": false}
	for et, w := range want {
		if SealsOn(et) != w {
			t.Errorf("SealsOn(%q) = %v", et, !w)
		}
	}
}

func TestValidateEventValid(t *testing.T) {
	tests := []string{
		// An RFC-032 emitter's message, as the issue gives it.
		`{"protocol_version":"4.1","message_type":"TOOL_REQUEST","event_id":"evt-1","plan_id":"plan-abc123","agent_id":"agent-gandalf-spell-executor-001","session_id":"ses-xyz789","timestamp":"2026-06-24T10:00:01Z","tool":"iam_create_user","arguments":{"username":"alice"}}`,
		`{"event_id":"e1","message_type":"TOOL_REQUEST","plan_id":"p","timestamp":"2026-06-24T10:00:01Z","tool":"iam_create_user","arguments":{"user":"alice"}}`,
		`{"event_id":"e1","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:01Z","tool":"t"}`,
		`{"event_id":"e2","message_type":"TOOL_RESULT","timestamp":"2026-06-24T10:00:02Z","tool":"t","status":"ERROR"}`,
		`{"event_id":"e3","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:03Z","session_id":"s","agent_id":"a","scope_envelope_id":"se"}`,
		`{"event_id":"e4","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:04Z"}`,
		`{"event_id":"e5","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:05Z","variables":{"u":"alice","n":2,"o":{"a":[1]}},"observations":[{"call":"user_exists","args":["alice"],"value":true},{"call":"now","value":null}]}`,
		`{"event_id":"e6","message_type":"PLAN_COMPLETE","timestamp":"2026-06-24T10:00:06Z"}`,
	}
	for _, raw := range tests {
		e, err := ValidateEvent([]byte(raw))
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if !bytes.Equal(e.Raw, []byte(raw)) || e.At.IsZero() {
			t.Errorf("%s: raw/at not kept", raw)
		}
	}
	e, _ := ValidateEvent([]byte(tests[6]))
	if len(e.Observations) != 2 || e.Observations[0].Call != "user_exists" || e.Observations[1].Value != nil ||
		e.Variables["n"] != 2.0 {
		t.Errorf("outcome decoded %+v", e)
	}
}

func TestValidateEventInvalid(t *testing.T) {
	tests := []struct {
		raw, path, substr string
	}{
		{`{"message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z"}`, "event_id", "required"},
		{`{"event_id":"e","timestamp":"2026-06-24T10:00:00Z"}`, "message_type", "required"},
		{`{"event_id":"e","message_type":"STEP","timestamp":"2026-06-24T10:00:00Z"}`, "message_type", "TOOL_REQUEST"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE"}`, "timestamp", "required"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"now"}`, "timestamp", "RFC 3339"},
		{`{"event_id":"e","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z"}`, "tool", "required"},
		{`{"event_id":"e","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"t","arguments":[1]}`, "arguments", "object"},
		{`{"event_id":"e","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"t","variables":{}}`, "variables", "not allowed on a TOOL_REQUEST"},
		{`{"event_id":"e","message_type":"TOOL_RESULT","timestamp":"2026-06-24T10:00:00Z","tool":"t"}`, "status", "required"},
		{`{"event_id":"e","message_type":"TOOL_RESULT","timestamp":"2026-06-24T10:00:00Z","tool":"t","status":"ok"}`, "status", "SUCCESS"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z","tool":"t"}`, "tool", "not allowed"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z","Event_ID":"x"}`, "Event_ID", "not a known field"},
		{`{"event_id":"e","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:00Z","variables":[1]}`, "variables", "object"},
		{`{"event_id":"e","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:00Z","observations":{}}`, "observations", "array"},
		{`{"event_id":"e","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:00Z","observations":[{"call":"f"}]}`, "observations[0].value", "required"},
		{`{"event_id":"e","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:00Z","observations":[{"value":1}]}`, "observations[0].call", "required"},
		{`{"event_id":"e","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:00Z","observations":[{"call":"f","args":"x","value":1}]}`, "observations[0].args", "array"},
		{`{"event_id":"e","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:00Z","observations":[{"call":"f","value":1,"at":2}]}`, "observations[0].at", "not a known field"},
		{`{"event_id":"` + strings.Repeat("e", 200) + `","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:00Z"}`, "event_id", "128"},
		// The type is named by message_type; event_type is refused with
		// the fix, alone or beside message_type.
		{`{"event_id":"e","event_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"t"}`, "event_type", `send "message_type": "TOOL_REQUEST"`},
		{`{"event_id":"e","event_type":"STEP","timestamp":"2026-06-24T10:00:00Z"}`, "event_type", "send \"message_type\": one of TOOL_REQUEST, TOOL_RESULT"},
		{`{"event_id":"e","event_type":"STEP_COMPLETE","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z"}`, "event_type", "also has message_type, so its type would be ambiguous: remove event_type"},
		{`{"event_id":"e","event_type":"STEP_COMPLETE","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:00Z"}`, "event_type", "remove event_type"},
		{`{"event_id":"e","Event_Type":"STEP_COMPLETE","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:00Z"}`, "Event_Type", "differs from event_type only in letter case"},
		{`{"event_id":"e","message_type":"step_complete","timestamp":"2026-06-24T10:00:00Z"}`, "message_type", "TOOL_REQUEST"},
		{`{"event_id":"e","message_type":"ANTICIPATE","timestamp":"2026-06-24T10:00:00Z"}`, "message_type", "POST /v1/anticipations"},
		{`{"event_id":"e","message_type":"VERIFY","timestamp":"2026-06-24T10:00:00Z"}`, "message_type", "not an execution event"},
		{`{"event_id":"e","message_type":7,"timestamp":"2026-06-24T10:00:00Z"}`, "message_type", "string"},
		// protocol_version is optional, but a string of at most 32 bytes.
		{`{"protocol_version":4.1,"event_id":"e","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:00Z"}`, "protocol_version", "string"},
		{`{"protocol_version":"","event_id":"e","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:00Z"}`, "protocol_version", "not be empty"},
		{`{"protocol_version":"` + strings.Repeat("4", 33) + `","event_id":"e","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:00Z"}`, "protocol_version", "32 bytes"},
		// Fields the server does not interpret are kept, but not under a
		// name that another reader could take for an interpreted one, and
		// not without bound.
		{`{"event_id":"e","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"t","Tool":"u"}`, "Tool", "differs from tool only in letter case"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z","Status":"ERROR"}`, "Status", "differs from status only in letter case"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z","Message_Type":"ESCALATION"}`, "Message_Type", "letter case"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z","` + strings.Repeat("k", 129) + `":1}`, strings.Repeat("k", 64) + "...", "longer than 128 bytes"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z"," trace":1}`, " trace", "white space"},
		{`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z",` + extraFields(MaxExtraFields+1) + `}`, "", "at most 64 are kept"},
		// status is matched in any letter case, but still one of four.
		{`{"event_id":"e","message_type":"TOOL_RESULT","timestamp":"2026-06-24T10:00:00Z","tool":"t","status":"succeeded"}`, "status", "any letter case"},
	}
	for _, tt := range tests {
		_, err := ValidateEvent([]byte(tt.raw))
		if msg := fieldMessage(err, tt.path); !errs.Is(err, errs.Invalid) || !strings.Contains(msg, tt.substr) {
			t.Errorf("%s: err %v; want %s containing %q", tt.raw, err, tt.path, tt.substr)
		}
	}
	for _, raw := range []string{``, `[]`, `{"a":1,"a":2}`, `nope`} {
		if _, err := ValidateEvent([]byte(raw)); !errs.Is(err, errs.Invalid) {
			t.Errorf("%q accepted", raw)
		}
	}
}

func TestBindPlan(t *testing.T) {
	e, _ := ValidateEvent([]byte(`{"event_id":"e","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:00Z"}`))
	if err := e.BindPlan("plan-1"); err != nil || e.PlanID != "plan-1" {
		t.Fatalf("BindPlan: %v %q", err, e.PlanID)
	}
	if err := e.BindPlan("plan-2"); fieldMessage(err, "plan_id") == "" {
		t.Errorf("mismatch accepted: %v", err)
	}
	if err := e.BindPlan(""); fieldMessage(err, "plan_id") == "" {
		t.Errorf("empty plan accepted: %v", err)
	}
}

func TestBuildEnvMerging(t *testing.T) {
	raws := [][]byte{
		[]byte(`{"event_id":"1","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"a"}`),
		[]byte(`{"event_id":"1","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"a"}`), // duplicate id
		[]byte(`{"event_id":"2","message_type":"TOOL_RESULT","timestamp":"2026-06-24T10:00:01Z","tool":"a","status":"TIMEOUT"}`),
		[]byte(`{"event_id":"3","message_type":"ESCALATION","timestamp":"2026-06-24T10:00:02Z"}`),
		[]byte(`{"event_id":"4","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:03Z","variables":{"x":1,"y":"old"},"observations":[{"call":"f","args":[1],"value":"old"}]}`),
		[]byte(`{"event_id":"5","message_type":"OUTCOME","timestamp":"2026-06-24T10:01:00Z","variables":{"y":"new"},"observations":[{"call":"f","args":[1.0],"value":"new"}]}`),
	}
	env := envOf(t, raws, nil)
	tr := env.Trajectory()
	if tr.ToolCounts["a"] != 1 || tr.ErrorCount != 1 || tr.EscalationCount != 1 || tr.StepCount != 0 || tr.DurationSeconds() != 60 {
		t.Errorf("trajectory %+v", tr)
	}
	if v, _ := env.Value("y"); v != "new" {
		t.Errorf("y = %v", v)
	}
	if v, _ := env.Value("x"); v != 1.0 {
		t.Errorf("x = %v", v)
	}
	if v, _ := env.Observe("f", 1); v != "new" {
		t.Errorf("f(1) = %v", v)
	}
	if BuildEnv(nil, nil) == nil || BuildEnv([]*Event{nil}, nil) == nil {
		t.Errorf("nil events")
	}
}

func TestChain(t *testing.T) {
	events := seedEvents(t, 3, false, nil)
	digests := make([]string, len(events))
	prev := GenesisDigest
	for i, e := range events {
		digests[i] = ChainDigest(prev, e)
		if !validDigestForm(digests[i]) {
			t.Fatalf("digest %q", digests[i])
		}
		prev = digests[i]
	}
	if bad, ok := VerifyChain(events, digests); !ok || bad != -1 {
		t.Fatalf("VerifyChain = %d %v", bad, ok)
	}
	// White space and key order do not matter (canonical form).
	var m map[string]any
	_ = json.Unmarshal(events[2], &m)
	re, _ := json.MarshalIndent(m, "", "   ")
	alt := append([][]byte(nil), events...)
	alt[2] = re
	if _, ok := VerifyChain(alt, digests); !ok {
		t.Errorf("re-indented event breaks the chain")
	}
	// Tampering with an event.
	tampered := append([][]byte(nil), events...)
	tampered[4] = bytes.Replace(tampered[4], []byte(`"SUCCESS"`), []byte(`"ERROR"`), 1)
	if bad, ok := VerifyChain(tampered, digests); ok || bad != 4 {
		t.Errorf("tamper: %d %v", bad, ok)
	}
	// Reordering.
	swapped := append([][]byte(nil), events...)
	swapped[1], swapped[2] = swapped[2], swapped[1]
	if bad, ok := VerifyChain(swapped, digests); ok || bad != 1 {
		t.Errorf("swap: %d %v", bad, ok)
	}
	// Removing an event.
	removed := append(append([][]byte(nil), events[:3]...), events[4:]...)
	if bad, ok := VerifyChain(removed, append(append([]string(nil), digests[:3]...), digests[4:]...)); ok || bad != 3 {
		t.Errorf("removal: %d %v", bad, ok)
	}
	// A forged digest.
	forged := append([]string(nil), digests...)
	forged[0] = "sha256:" + strings.Repeat("0", 64)
	if bad, ok := VerifyChain(events, forged); ok || bad != 0 {
		t.Errorf("forged: %d %v", bad, ok)
	}
	// Length mismatches.
	if bad, ok := VerifyChain(events, digests[:2]); ok || bad != 2 {
		t.Errorf("short digests: %d %v", bad, ok)
	}
	if bad, ok := VerifyChain(events[:2], digests); ok || bad != 2 {
		t.Errorf("extra digests: %d %v", bad, ok)
	}
	if bad, ok := VerifyChain(nil, nil); !ok || bad != -1 {
		t.Errorf("empty chain: %d %v", bad, ok)
	}
	if ChainDigest("", []byte("not json")) != "" || ChainDigest("", nil) != "" {
		t.Errorf("invalid event digested")
	}
	if bad, ok := VerifyChain([][]byte{[]byte("x")}, []string{""}); ok || bad != 0 {
		t.Errorf("invalid event verified")
	}
	// The genesis is independent of anticipations: the same events give
	// the same head.
	if chainHead(events) != digests[len(digests)-1] {
		t.Errorf("head differs")
	}
}

func TestCheckUpdate(t *testing.T) {
	a := mustValidate(t, seedRaw(t))
	var pretty bytes.Buffer
	_ = json.Indent(&pretty, a.Raw, "", "\t")
	same := mustValidate(t, pretty.Bytes())
	m := seedMap(t)
	policy(m)["passing_threshold"] = 0.9
	changed := mustValidate(t, signed(t, m))
	m = seedMap(t)
	m["anticipation_id"] = "ant-other"
	otherID := mustValidate(t, signed(t, m))

	for _, sealed := range []bool{false, true} {
		if id, err := CheckUpdate(a, same, sealed); !id || err != nil {
			t.Errorf("identical sealed=%v: %v %v", sealed, id, err)
		}
		if _, err := CheckUpdate(a, otherID, sealed); fieldMessage(err, "anticipation_id") == "" {
			t.Errorf("other id sealed=%v: %v", sealed, err)
		}
	}
	if id, err := CheckUpdate(a, changed, false); id || err != nil {
		t.Errorf("unsealed change: %v %v", id, err)
	}
	if id, err := CheckUpdate(a, changed, true); id || !errs.Is(err, errs.Conflict) {
		t.Errorf("sealed change: %v %v", id, err)
	}
	if _, err := CheckUpdate(nil, a, false); err == nil {
		t.Errorf("nil existing accepted")
	}
	if err := CheckNew(a, true); !errs.Is(err, errs.Conflict) {
		t.Errorf("CheckNew begun: %v", err)
	}
	if err := CheckNew(a, false); err != nil {
		t.Errorf("CheckNew: %v", err)
	}
	if Identical(a, nil) || Identical(a, changed) || !Identical(a, same) {
		t.Errorf("Identical wrong")
	}
}

func FuzzValidateEvent(f *testing.F) {
	f.Add([]byte(`{"event_id":"e5","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:05Z","variables":{"u":"alice"},"observations":[{"call":"f","args":[1],"value":true}]}`))
	f.Add([]byte(`{"event_id":"e","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"t","arguments":{}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		e, err := ValidateEvent(raw)
		if err != nil {
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("code %s", errs.CodeOf(err))
			}
			return
		}
		if ChainDigest(GenesisDigest, e.Raw) == "" {
			t.Fatalf("valid event cannot be chained")
		}
		// Kept as sent; the fields it interprets are the RFC-032 ones.
		if !bytes.Equal(e.Raw, raw) {
			t.Fatalf("raw not kept")
		}
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil {
			t.Fatalf("accepted a non-object: %v", err)
		}
		if _, ok := top[LegacyTypeField]; ok {
			t.Fatalf("accepted event_type")
		}
		if e.EventType == ToolResult && e.Status != ToolSuccess && e.Status != ToolError && e.Status != ToolTimeout && e.Status != ToolDenied {
			t.Fatalf("status %q", e.Status)
		}
		if len(e.Extra) > MaxExtraFields {
			t.Fatalf("%d extra fields", len(e.Extra))
		}
		for _, k := range e.Extra {
			if _, ok := top[k]; !ok {
				t.Fatalf("extra field %q not in the event", k)
			}
			for _, n := range append(allFields(), LegacyTypeField) {
				if strings.EqualFold(k, n) {
					t.Fatalf("extra field %q is a case variant of %s", k, n)
				}
			}
		}
		env := BuildEnv([]*Event{e}, nil)
		_ = SummaryOf(env.Trajectory())
	})
}

func extraFields(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"x_%03d":%d`, i, i)
	}
	return strings.Join(parts, ",")
}

// TestValidateEventKeepsExtras: fields the server does not interpret are
// accepted on every event type, kept byte for byte in Raw (so the chain
// digest covers them) and named in Extra; protocol_version is kept.
func TestValidateEventKeepsExtras(t *testing.T) {
	tests := []struct {
		raw   string
		extra []string
	}{
		{`{"protocol_version":"4.1","message_type":"TOOL_REQUEST","event_id":"e1","timestamp":"2026-06-24T10:00:01Z","tool":"t","trace_id":"4bf92f35","span_id":"00f067aa","model":"gpt-4.1"}`,
			[]string{"model", "span_id", "trace_id"}},
		{`{"message_type":"TOOL_RESULT","event_id":"e2","timestamp":"2026-06-24T10:00:02Z","tool":"t","status":"success","result":{"rows":[1,2,{"deep":[null,true]}]},"latency_ms":12.5}`,
			[]string{"latency_ms", "result"}},
		{`{"message_type":"STEP_COMPLETE","event_id":"e3","timestamp":"2026-06-24T10:00:03Z","cost":{"usd":0.0042},"step":"2/3","x":null}`,
			[]string{"cost", "step", "x"}},
		{`{"message_type":"OUTCOME","event_id":"e4","timestamp":"2026-06-24T10:00:04Z","variables":{"u":1},"summary":"done"}`,
			[]string{"summary"}},
		{`{"message_type":"PLAN_COMPLETE","event_id":"e5","timestamp":"2026-06-24T10:00:05Z",` + extraFields(MaxExtraFields) + `}`, nil},
	}
	for _, tt := range tests {
		e, err := ValidateEvent([]byte(tt.raw))
		if err != nil {
			t.Errorf("%.80s: %v", tt.raw, err)
			continue
		}
		if !bytes.Equal(e.Raw, []byte(tt.raw)) {
			t.Errorf("%.80s: raw not kept", tt.raw)
		}
		if tt.extra != nil && strings.Join(e.Extra, ",") != strings.Join(tt.extra, ",") {
			t.Errorf("%.80s: Extra = %v; want %v", tt.raw, e.Extra, tt.extra)
		}
		if tt.extra == nil && len(e.Extra) != MaxExtraFields {
			t.Errorf("%.80s: %d extra fields", tt.raw, len(e.Extra))
		}
	}
	e, _ := ValidateEvent([]byte(tests[0].raw))
	if e.ProtocolVersion != "4.1" || e.EventType != ToolRequest {
		t.Errorf("decoded %+v", e)
	}
	// An extra field changes the chain digest: it is covered.
	plain := []byte(`{"message_type":"STEP_COMPLETE","event_id":"e3","timestamp":"2026-06-24T10:00:03Z"}`)
	withExtra := []byte(`{"message_type":"STEP_COMPLETE","event_id":"e3","timestamp":"2026-06-24T10:00:03Z","trace_id":"a"}`)
	otherExtra := []byte(`{"message_type":"STEP_COMPLETE","event_id":"e3","timestamp":"2026-06-24T10:00:03Z","trace_id":"b"}`)
	d0, d1, d2 := ChainDigest(GenesisDigest, plain), ChainDigest(GenesisDigest, withExtra), ChainDigest(GenesisDigest, otherExtra)
	if d0 == "" || d0 == d1 || d1 == d2 {
		t.Errorf("extra fields not covered by the chain digest: %s %s %s", d0, d1, d2)
	}
}

// TestToolResultStatusAnyCase: TOOL_RESULT status is matched without regard
// to letter case and counted in error_count by its meaning, in Summarize
// and in the stored Aggregate alike.
func TestToolResultStatusAnyCase(t *testing.T) {
	for _, tt := range []struct {
		status, want string
		errors       int
	}{
		{"SUCCESS", ToolSuccess, 0}, {"success", ToolSuccess, 0}, {"Success", ToolSuccess, 0},
		{"ERROR", ToolError, 1}, {"error", ToolError, 1}, {"timeout", ToolTimeout, 1}, {"Denied", ToolDenied, 1},
	} {
		raw := `{"message_type":"TOOL_RESULT","event_id":"r","timestamp":"2026-06-24T10:00:02Z","tool":"t","status":"` + tt.status + `"}`
		e, err := ValidateEvent([]byte(raw))
		if err != nil {
			t.Errorf("%s: %v", tt.status, err)
			continue
		}
		if e.Status != tt.want || !bytes.Contains(e.Raw, []byte(`"`+tt.status+`"`)) {
			t.Errorf("%s: Status %q, raw %s", tt.status, e.Status, e.Raw)
		}
		if got := Summarize([]*Event{e}).ErrorCount; got != tt.errors {
			t.Errorf("%s: Summarize error_count %d; want %d", tt.status, got, tt.errors)
		}
		var a Aggregate
		a.Add(e)
		if a.ErrorCount != tt.errors {
			t.Errorf("%s: Aggregate error_count %d; want %d", tt.status, a.ErrorCount, tt.errors)
		}
	}
}
