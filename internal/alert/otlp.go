package alert

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// The OpenTelemetry GenAI semantic conventions' evaluation event
// (gen_ai.evaluation.result, an event: a log record with an event name)
// and its attributes.
const (
	EvaluationEventName      = "gen_ai.evaluation.result"
	attrEvaluationName       = "gen_ai.evaluation.name"
	attrEvaluationScoreValue = "gen_ai.evaluation.score.value"
	attrEvaluationScoreLabel = "gen_ai.evaluation.score.label"
	attrEvaluationExplain    = "gen_ai.evaluation.explanation"
	attrAgentID              = "gen_ai.agent.id"
	attrErrorType            = "error.type"
	// OverallEvaluationName names the event of a VERIFY's verdict (the
	// others are named by their criterion id).
	OverallEvaluationName = "aigp.verdict"
)

// OTLPLogsBody is the body an otlp channel POSTs: an OTLP/HTTP
// ExportLogsServiceRequest in its JSON encoding (the OTLP specification's
// JSON mapping of the protobuf messages: lowerCamelCase field names,
// 64-bit integers as decimal strings). A verification event becomes one
// gen_ai.evaluation.result event per criterion (named by its criterion
// id, the score as score.value, the status PASS, FAIL, PENDING or ERROR
// as score.label in lower case, the evidence and rationale as
// explanation) and one for the verdict (named aigp.verdict), each with the
// aigp.* attributes that name the VERIFY, its plan and its ANTICIPATE. A
// channel.test is one event named clockwork.channel.test. now is the
// observed time. Errors: the event carries no VERIFY that decodes, or is
// of a type an otlp channel does not carry.
func OTLPLogsBody(n *Notification, now time.Time) ([]byte, error) {
	var records []otlpLogRecord
	switch n.Event.Type {
	case VerificationCompleted, VerificationFailed:
		var v anticipate.Verification
		if err := json.Unmarshal(n.Event.Data.Verification, &v); err != nil {
			return nil, fmt.Errorf("the event's VERIFY does not decode: %w", err)
		}
		records = evaluationRecords(&v, n.Event.Type, now)
	case ChannelTest:
		records = []otlpLogRecord{{TimeUnixNano: nanos(now), ObservedTimeUnixNano: nanos(now), SeverityNumber: 9, SeverityText: "INFO",
			EventName: "clockwork.channel.test", Body: &otlpValue{StringValue: ptr("a test of channel " + n.ChannelID)},
			Attributes: []otlpKeyValue{str("clockwork.channel.id", n.ChannelID)}}}
	default:
		return nil, fmt.Errorf("an otlp channel carries VERIFYs' scores, not %s", n.Event.Type)
	}
	return json.Marshal(otlpLogsRequest{ResourceLogs: []otlpResourceLogs{{
		Resource:  otlpResource{Attributes: []otlpKeyValue{str("service.name", "clockwork")}},
		ScopeLogs: []otlpScopeLogs{{Scope: otlpScope{Name: "github.com/agentclock/clockwork"}, LogRecords: records}},
	}}})
}

// evaluationRecords are the events of one VERIFY.
func evaluationRecords(v *anticipate.Verification, typ EventType, now time.Time) []otlpLogRecord {
	at := now
	if t, err := time.Parse(time.RFC3339Nano, v.Timestamp); err == nil {
		at = t
	}
	common := []otlpKeyValue{
		str(attrAgentID, v.AgentID),
		str("aigp.verification_id", v.VerificationID),
		str("aigp.anticipation_id", v.AnticipationID),
		str("aigp.plan_id", v.PlanID),
		str("aigp.session_id", v.SessionID),
		str("aigp.app_id", v.AppID),
		str("aigp.anticipation_digest", v.AnticipationDigest),
		str("aigp.execution_digest", v.ExecutionDigest),
		str("clockwork.event.type", string(typ)),
	}
	record := func(attrs ...otlpKeyValue) otlpLogRecord {
		return otlpLogRecord{TimeUnixNano: nanos(at), ObservedTimeUnixNano: nanos(now), SeverityNumber: 9, SeverityText: "INFO",
			EventName: EvaluationEventName, Attributes: append(attrs, common...)}
	}
	var out []otlpLogRecord
	for _, r := range v.Results {
		attrs := []otlpKeyValue{str(attrEvaluationName, r.CriterionID), str(attrEvaluationScoreLabel, lowerStatus(r.Status))}
		if r.Score != nil {
			attrs = append(attrs, float(attrEvaluationScoreValue, *r.Score))
		}
		explanation := r.Evidence
		if r.Rationale != "" {
			explanation = r.Rationale + " (" + r.Evidence + ")"
		}
		if explanation != "" {
			attrs = append(attrs, str(attrEvaluationExplain, explanation))
		}
		if r.Status == anticipate.StatusErrored {
			attrs = append(attrs, str(attrErrorType, "aigp.criterion_error"))
		}
		attrs = append(attrs, str("aigp.criterion.category", string(r.Category)), str("aigp.criterion.measurement", string(r.Measurement)),
			float("aigp.criterion.weight", r.Weight), str("aigp.graded_by", r.GradedBy))
		out = append(out, record(attrs...))
	}
	label := "pass"
	if v.Verdict != anticipate.VerdictPass {
		label = "fail"
	}
	explanation := fmt.Sprintf("score %s against the passing threshold %s", strconv.FormatFloat(v.Score, 'g', -1, 64), strconv.FormatFloat(v.PassingThreshold, 'g', -1, 64))
	if len(v.AntiCriteriaFailed) > 0 {
		explanation += fmt.Sprintf("; anti criteria failed: %v", v.AntiCriteriaFailed)
	}
	out = append(out, record(str(attrEvaluationName, OverallEvaluationName), float(attrEvaluationScoreValue, v.Score), str(attrEvaluationScoreLabel, label),
		str(attrEvaluationExplain, explanation), float("aigp.passing_threshold", v.PassingThreshold)))
	return out
}

func lowerStatus(s anticipate.Status) string {
	switch s {
	case anticipate.StatusPass:
		return "pass"
	case anticipate.StatusFail:
		return "fail"
	case anticipate.StatusErrored:
		return "error"
	}
	return "pending"
}

func nanos(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

func ptr[T any](v T) *T { return &v }

func str(k, v string) otlpKeyValue { return otlpKeyValue{Key: k, Value: otlpValue{StringValue: &v}} }

func float(k string, v float64) otlpKeyValue {
	return otlpKeyValue{Key: k, Value: otlpValue{DoubleValue: &v}}
}

// The OTLP JSON encoding of ExportLogsServiceRequest, as far as these
// events need it. (Written here rather than with the protobuf types, which
// would not fit the API function's size budget; the tests decode it with
// the official ones.)
type otlpLogsRequest struct {
	ResourceLogs []otlpResourceLogs `json:"resourceLogs"`
}

type otlpResourceLogs struct {
	Resource  otlpResource    `json:"resource"`
	ScopeLogs []otlpScopeLogs `json:"scopeLogs"`
}

type otlpResource struct {
	Attributes []otlpKeyValue `json:"attributes"`
}

type otlpScopeLogs struct {
	Scope      otlpScope       `json:"scope"`
	LogRecords []otlpLogRecord `json:"logRecords"`
}

type otlpScope struct {
	Name string `json:"name"`
}

type otlpLogRecord struct {
	TimeUnixNano         string         `json:"timeUnixNano"`
	ObservedTimeUnixNano string         `json:"observedTimeUnixNano"`
	SeverityNumber       int            `json:"severityNumber"`
	SeverityText         string         `json:"severityText"`
	EventName            string         `json:"eventName"`
	Body                 *otlpValue     `json:"body,omitempty"`
	Attributes           []otlpKeyValue `json:"attributes"`
}

type otlpKeyValue struct {
	Key   string    `json:"key"`
	Value otlpValue `json:"value"`
}

type otlpValue struct {
	StringValue *string  `json:"stringValue,omitempty"`
	DoubleValue *float64 `json:"doubleValue,omitempty"`
}
