package alert

import (
	"encoding/json"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// TestOTLPLogsBody: the body decodes with the official OTLP protobuf types
// (protojson, as a collector's OTLP/HTTP JSON receiver decodes it) into one
// gen_ai.evaluation.result event per criterion and one for the verdict,
// with the semantic conventions' attributes.
func TestOTLPLogsBody(t *testing.T) {
	one, half := 1.0, 0.5
	v := anticipate.Verification{VerificationID: "vrf-1", AnticipationID: "ant-1", PlanID: "plan-1", AgentID: "agent-1", Timestamp: "2026-12-06T10:00:00Z",
		Verdict: anticipate.VerdictFail, Score: 0.75, PassingThreshold: 0.8,
		Results: []anticipate.Result{
			{CriterionID: "oc-1", Category: anticipate.CategoryOutcome, Measurement: anticipate.Deterministic, Weight: 1, Status: anticipate.StatusPass, Score: &one, Evidence: "assertion evaluated to true", GradedBy: "code"},
			{CriterionID: "tc-1", Category: anticipate.CategoryTrajectory, Measurement: anticipate.Heuristic, Weight: 1, Status: anticipate.StatusFail, Score: &half, Evidence: "graded by model:judge", Rationale: "terse", GradedBy: "model:judge"},
		}}
	raw, _ := json.Marshal(v)
	n := &Notification{ID: "ntf_1", AgentID: "agent-1", ChannelID: "scores", Event: Event{Type: VerificationCompleted, Timestamp: v.Timestamp,
		Data: EventData{AgentID: "agent-1", Verification: raw, Verdict: "FAIL"}}}
	body, err := OTLPLogsBody(n, time.Date(2026, 12, 6, 10, 0, 1, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var req collogs.ExportLogsServiceRequest
	if err := (protojson.UnmarshalOptions{}).Unmarshal(body, &req); err != nil {
		t.Fatalf("not OTLP JSON: %v\n%s", err, body)
	}
	recs := req.ResourceLogs[0].ScopeLogs[0].LogRecords
	if len(recs) != 3 {
		t.Fatalf("%d records", len(recs))
	}
	attrs := func(i int) map[string]any {
		out := map[string]any{}
		for _, kv := range recs[i].Attributes {
			if kv.Value.GetStringValue() != "" {
				out[kv.Key] = kv.Value.GetStringValue()
			} else {
				out[kv.Key] = kv.Value.GetDoubleValue()
			}
		}
		return out
	}
	for i, want := range []map[string]any{
		{"gen_ai.evaluation.name": "oc-1", "gen_ai.evaluation.score.value": 1.0, "gen_ai.evaluation.score.label": "pass", "gen_ai.agent.id": "agent-1", "aigp.plan_id": "plan-1"},
		{"gen_ai.evaluation.name": "tc-1", "gen_ai.evaluation.score.value": 0.5, "gen_ai.evaluation.score.label": "fail", "gen_ai.evaluation.explanation": "terse (graded by model:judge)"},
		{"gen_ai.evaluation.name": "aigp.verdict", "gen_ai.evaluation.score.value": 0.75, "gen_ai.evaluation.score.label": "fail", "aigp.verification_id": "vrf-1"},
	} {
		if recs[i].EventName != "gen_ai.evaluation.result" || recs[i].TimeUnixNano != uint64(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC).UnixNano()) {
			t.Errorf("record %d: event %q time %d", i, recs[i].EventName, recs[i].TimeUnixNano)
		}
		got := attrs(i)
		for k, w := range want {
			if got[k] != w {
				t.Errorf("record %d: %s = %v, want %v", i, k, got[k], w)
			}
		}
	}
	if _, err := OTLPLogsBody(&Notification{Event: Event{Type: Lapsed}}, time.Now()); err == nil {
		t.Error("a lapse rendered as a score")
	}
}
