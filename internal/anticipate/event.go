package anticipate

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
)

// EventType is the type of an execution event.
type EventType string

// Execution event types.
const (
	ToolRequest  EventType = "TOOL_REQUEST"
	ToolResult   EventType = "TOOL_RESULT"
	StepComplete EventType = "STEP_COMPLETE"
	Escalation   EventType = "ESCALATION"
	Outcome      EventType = "OUTCOME"
	PlanComplete EventType = "PLAN_COMPLETE"
)

// Tool result statuses, matched without regard to letter case ("success"
// is SUCCESS) and kept in Event.Status in these upper-case forms.
// error_count counts every TOOL_RESULT whose status is not ToolSuccess.
const (
	ToolSuccess = "SUCCESS"
	ToolError   = "ERROR"
	ToolTimeout = "TIMEOUT"
	ToolDenied  = "DENIED"
)

// Limits on an execution event.
const (
	MaxToolLen      = 128  // bytes
	MaxVariables    = 1000 // OUTCOME variables per event
	MaxObservations = 1000 // OUTCOME observations per event
	MaxObsArgs      = 32   // arguments of one observation
)

// Event is a validated execution event of a plan: an RFC-032 message whose
// message_type is one of the six event types. Raw is the event exactly as
// received, fields the server does not interpret included; the chain
// digest covers Raw. Obtain one from ValidateEvent.
type Event struct {
	ProtocolVersion string                  `json:"protocol_version,omitempty"`  // AIGP protocol version, optional, as sent
	EventID         string                  `json:"event_id"`                    // unique per plan; repeats are idempotent
	EventType       EventType               `json:"message_type"`                // one of the six event types
	PlanID          string                  `json:"plan_id,omitempty"`           // the plan; see BindPlan
	Timestamp       string                  `json:"timestamp"`                   // RFC 3339, as sent
	Tool            string                  `json:"tool,omitempty"`              // TOOL_REQUEST, TOOL_RESULT
	Arguments       json.RawMessage         `json:"arguments,omitempty"`         // TOOL_REQUEST: a JSON object
	Status          string                  `json:"status,omitempty"`            // TOOL_RESULT: SUCCESS, ERROR, TIMEOUT, DENIED (upper-cased)
	Variables       map[string]any          `json:"variables,omitempty"`         // OUTCOME: assertion variables
	Observations    []assertion.Observation `json:"observations,omitempty"`      // OUTCOME: observed call results
	ScopeEnvelopeID string                  `json:"scope_envelope_id,omitempty"` // optional context
	SessionID       string                  `json:"session_id,omitempty"`        // optional context
	AgentID         string                  `json:"agent_id,omitempty"`          // optional context

	// Extra names the fields the server does not interpret, sorted; they
	// are kept in Raw.
	Extra []string `json:"-"`
	// Raw is the event as received.
	Raw json.RawMessage `json:"-"`
	// Canonical is the RFC 8785 form of Raw, computed once by
	// ValidateEvent for the chain digest and the retry comparison.
	Canonical []byte `json:"-"`
	// At is Timestamp parsed, in UTC.
	At time.Time `json:"-"`
}

// LegacyTypeField is the name this API used for the event type before
// events became RFC-032 messages; an event that sends it is refused with
// a message saying to send message_type instead.
const LegacyTypeField = "event_type"

// ProtocolVersionField is the RFC-032 protocol version field of every
// message: required on an ANTICIPATE, optional on an execution event, kept
// as sent.
const ProtocolVersionField = "protocol_version"

var commonEventFields = []string{ProtocolVersionField, "message_type", "event_id", "plan_id", "timestamp",
	"scope_envelope_id", "session_id", "agent_id"}

var eventFields = map[EventType][]string{
	ToolRequest:  {"tool", "arguments"},
	ToolResult:   {"tool", "status"},
	StepComplete: nil,
	Escalation:   nil,
	Outcome:      {"variables", "observations"},
	PlanComplete: nil,
}

var eventTypes = []string{string(ToolRequest), string(ToolResult), string(StepComplete),
	string(Escalation), string(Outcome), string(PlanComplete)}

// SealsOn reports whether storing an event of type t seals every
// ANTICIPATE bound to its plan: true for TOOL_REQUEST and STEP_COMPLETE
// (RFC-032 section 3.5), false for every other value.
func SealsOn(t EventType) bool {
	return t == ToolRequest || t == StepComplete
}

// ValidateEvent decodes and validates an execution event, an RFC-032
// message such as {"protocol_version":"4.1","message_type":"TOOL_REQUEST",
// "event_id":…,"timestamp":…,"tool":…,"arguments":…}. Fields the server
// does not interpret (trace ids, model names, costs) are kept in Raw and
// named in Extra; the fields it interprets are validated strictly.
//
// It returns an *errs.Error with Code errs.Invalid, naming each failing
// field by JSON path, when raw is not a canonicalizable JSON object; it
// carries event_type (the type is named by message_type; the error says
// so, also when message_type is present too); event_id, message_type or
// timestamp is missing; message_type is not one of the six types (exact
// upper case); protocol_version is present but not a non-empty string of
// at most 32 bytes; the timestamp is not RFC 3339; an id is empty, longer
// than 128 bytes or has control characters; a field interpreted on another
// event type is sent on this one (TOOL_REQUEST: tool, arguments;
// TOOL_RESULT: tool, status; OUTCOME: variables, observations; the others
// none beyond the common ones), since it would be ignored; TOOL_REQUEST or
// TOOL_RESULT lacks tool; TOOL_RESULT lacks status or it is not SUCCESS,
// ERROR, TIMEOUT or DENIED in any letter case; arguments or variables is
// not an object; an observation lacks call or value, has args that are not
// an array, or has a field other than call, args and value; the limits on
// variables and observations are exceeded; or a field the server does not
// interpret has a name that is not a valid identifier or equals an
// interpreted one but for letter case, or there are more than
// MaxExtraFields of them. plan_id is optional because the plan is usually
// named by the URL; see BindPlan.
func ValidateEvent(raw []byte) (*Event, error) {
	canon, err := Canonical(raw)
	if err != nil {
		return nil, err
	}
	var c errs.Collector
	o, ok := decodeObject(&c, "", raw, true)
	if !ok {
		return nil, errs.E(errs.Invalid, "an execution event must be a JSON object")
	}
	e := &Event{Raw: append(json.RawMessage(nil), raw...), Canonical: canon}
	legacy, legacySent := o.m[LegacyTypeField]
	if legacySent {
		c.Add(LegacyTypeField, "is not accepted: an execution event is an RFC-032 message and names its type "+
			"with message_type (send \"message_type\": %s)%s", legacyTypeValue(legacy), alsoSent(o))
	}
	if o.get(ProtocolVersionField) != nil {
		e.ProtocolVersion = o.str(ProtocolVersionField, false, MaxVersionLen)
	}
	switch mt := o.get("message_type"); {
	case mt == nil && legacySent:
		// The event_type error already says to send message_type.
	case isString(mt, MessageTypeAnticipate):
		c.Add("message_type", "is ANTICIPATE, which is not an execution event: declare it with POST /v1/anticipations")
	case isString(mt, MessageTypeVerify):
		c.Add("message_type", "is VERIFY, which is not an execution event: the server produces VERIFY messages")
	default:
		e.EventType = EventType(o.enum("message_type", eventTypes...))
	}
	e.EventID = o.id("event_id", true)
	e.PlanID = o.id("plan_id", false)
	e.ScopeEnvelopeID = o.id("scope_envelope_id", false)
	e.SessionID = o.id("session_id", false)
	e.AgentID = o.id("agent_id", false)
	e.Timestamp = o.str("timestamp", true, 64)
	if e.Timestamp != "" {
		t, err := parseTime(e.Timestamp)
		if err != nil {
			c.Add("timestamp", "must be an RFC 3339 date-time such as 2026-06-24T10:00:05Z")
		} else {
			e.At = t
		}
	}
	interpreted := allFields()
	if extra, known := eventFields[e.EventType]; known {
		allowed := append(append([]string(nil), commonEventFields...), extra...)
		for _, k := range interpreted {
			if _, sent := o.m[k]; sent && !contains(allowed, k) {
				c.Add(k, "is not allowed on a %s event: the server reads it only on %s events, so here it would be ignored",
					e.EventType, typesReading(k))
				delete(o.m, k)
			}
		}
	}
	e.Extra = o.extras(interpreted, LegacyTypeField)

	switch e.EventType {
	case ToolRequest:
		e.Tool = o.str("tool", true, MaxToolLen)
		if raw := o.get("arguments"); raw != nil {
			if a, ok := decodeObject(&c, "arguments", raw, false); ok && a != nil {
				e.Arguments = append(json.RawMessage(nil), raw...)
			}
		}
	case ToolResult:
		e.Tool = o.str("tool", true, MaxToolLen)
		e.Status = o.enumFold("status", ToolSuccess, ToolError, ToolTimeout, ToolDenied)
	case Outcome:
		e.Variables = decodeVariables(&c, o)
		e.Observations = decodeObservations(&c, o)
	}
	if err := c.Err("invalid execution event"); err != nil {
		return nil, err
	}
	return e, nil
}

// isString reports whether raw is the JSON string s.
func isString(raw json.RawMessage, s string) bool {
	var v string
	return raw != nil && json.Unmarshal(raw, &v) == nil && v == s
}

// legacyTypeValue is the value to suggest for message_type in place of an
// event_type value: the value itself when it names an event type.
func legacyTypeValue(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil && contains(eventTypes, s) {
		return strconv.Quote(s)
	}
	return "one of " + strings.Join(eventTypes, ", ")
}

// alsoSent adds to the event_type error that message_type was sent too.
func alsoSent(o *object) string {
	if o.get("message_type") != nil {
		return "; this event also has message_type, so its type would be ambiguous: remove event_type"
	}
	return ""
}

// typesReading lists the event types on which field k is interpreted.
func typesReading(k string) string {
	var out []string
	for _, t := range eventTypes {
		if contains(eventFields[EventType(t)], k) {
			out = append(out, t)
		}
	}
	return strings.Join(out, " and ")
}

// allFields lists every field the server interprets on some event type.
func allFields() []string {
	return append(append([]string(nil), commonEventFields...),
		"tool", "arguments", "status", "variables", "observations")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func decodeVariables(c *errs.Collector, o *object) map[string]any {
	raw := o.get("variables")
	if raw == nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		c.Add("variables", "must be a JSON object of variable names to values")
		return nil
	}
	if len(m) > MaxVariables {
		c.Add("variables", "has more than %d variables", MaxVariables)
		return nil
	}
	for k := range m {
		if msg := checkID(k); msg != "" {
			c.Add("variables", "variable name %q %s", truncate(k, 40), msg)
			return nil
		}
	}
	return m
}

func decodeObservations(c *errs.Collector, o *object) []assertion.Observation {
	elems, ok := o.array("observations")
	if !ok || elems == nil {
		return nil
	}
	if len(elems) > MaxObservations {
		c.Add("observations", "has more than %d observations", MaxObservations)
		return nil
	}
	out := make([]assertion.Observation, 0, len(elems))
	for i, raw := range elems {
		path := fmt.Sprintf("observations[%d]", i)
		ob, ok := decodeObject(c, path, raw, true)
		if !ok {
			continue
		}
		ob.only("call", "args", "value")
		var obs assertion.Observation
		obs.Call = ob.id("call", true)
		if args, ok := ob.array("args"); ok {
			if len(args) > MaxObsArgs {
				c.Add(path+".args", "has more than %d arguments", MaxObsArgs)
			}
			obs.Args = make([]any, 0, len(args))
			for _, a := range args {
				var v any
				_ = json.Unmarshal(a, &v) // valid JSON: checked by Canonical
				obs.Args = append(obs.Args, v)
			}
		}
		if v, present := ob.m["value"]; !present {
			c.Add(path+".value", "is required (null is a value)")
		} else {
			_ = json.Unmarshal(v, &obs.Value)
		}
		out = append(out, obs)
	}
	return out
}

// truncate shortens s to at most n bytes, at a rune boundary, marking the
// cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// BindPlan sets the event's plan to planID (the plan named by the URL) when
// the body had none; it returns an errs.Invalid error naming plan_id when
// the body names a different plan, or when planID is not a valid id.
func (e *Event) BindPlan(planID string) error {
	if msg := checkID(planID); msg != "" {
		return &errs.Error{Code: errs.Invalid, Message: "invalid plan id",
			Fields: []errs.FieldError{{Path: "plan_id", Message: msg}}}
	}
	if e.PlanID != "" && e.PlanID != planID {
		return &errs.Error{Code: errs.Invalid, Message: "invalid execution event",
			Fields: []errs.FieldError{{Path: "plan_id", Message: fmt.Sprintf("is %q but the event was sent to plan %q", e.PlanID, planID)}}}
	}
	e.PlanID = planID
	return nil
}

// Summarize computes the trajectory of a plan from its events: counts of
// STEP_COMPLETE, ESCALATION, non-SUCCESS TOOL_RESULT and per-tool
// TOOL_REQUEST events, and the first and last timestamps. Nil events and
// repeated event ids are skipped.
func Summarize(events []*Event) assertion.Trajectory {
	t := assertion.Trajectory{ToolCounts: map[string]int{}}
	seen := map[string]bool{}
	argBytes := 0
	for _, e := range events {
		if e == nil || seen[e.EventID] {
			continue
		}
		seen[e.EventID] = true
		switch e.EventType {
		case StepComplete:
			t.StepCount++
		case Escalation:
			t.EscalationCount++
		case ToolRequest:
			t.ToolCounts[e.Tool]++
			var n int
			t.ToolSequence, t.ToolArgs, t.SequenceTruncated, n, t.ArgsTruncated = appendCall(t.ToolSequence, t.ToolArgs, t.SequenceTruncated, argBytes, t.ArgsTruncated, e)
			argBytes = n
		case ToolResult:
			if e.Status != ToolSuccess {
				t.ErrorCount++
			}
		}
		if !e.At.IsZero() {
			if t.First.IsZero() || e.At.Before(t.First) {
				t.First = e.At
			}
			if e.At.After(t.Last) {
				t.Last = e.At
			}
		}
	}
	return t
}

// BuildEnv builds the assertion environment of a plan's execution from its
// events in storage order: the trajectory (Summarize), the OUTCOME
// variables merged across OUTCOME events (a later event's value wins), and
// their observations (for the same call and arguments a later one wins).
// w may be nil. Nil events and repeated event ids are skipped.
func BuildEnv(events []*Event, w assertion.Watcher) *assertion.Env {
	vars := map[string]any{}
	var obs []assertion.Observation
	seen := map[string]bool{}
	for _, e := range events {
		if e == nil || seen[e.EventID] {
			continue
		}
		seen[e.EventID] = true
		if e.EventType != Outcome {
			continue
		}
		for k, v := range e.Variables {
			vars[k] = v
		}
		obs = append(obs, e.Observations...)
	}
	return assertion.NewEnv(Summarize(events), vars, obs, w)
}

// TrajectorySummary is the trajectory in the JSON form a model judge
// receives.
type TrajectorySummary struct {
	StepCount       int            `json:"step_count"`           // STEP_COMPLETE events
	EscalationCount int            `json:"escalation_count"`     // ESCALATION events
	ErrorCount      int            `json:"error_count"`          // non-SUCCESS TOOL_RESULT events
	ToolsInvoked    map[string]int `json:"tools_invoked"`        // TOOL_REQUEST events by tool
	DurationSeconds float64        `json:"duration_seconds"`     // last minus first event timestamp
	StartedAt       string         `json:"started_at,omitempty"` // first event timestamp
	EndedAt         string         `json:"ended_at,omitempty"`   // last event timestamp
}

// SummaryOf converts a trajectory to its JSON form.
func SummaryOf(t assertion.Trajectory) TrajectorySummary {
	s := TrajectorySummary{
		StepCount:       t.StepCount,
		EscalationCount: t.EscalationCount,
		ErrorCount:      t.ErrorCount,
		ToolsInvoked:    map[string]int{},
		DurationSeconds: t.DurationSeconds(),
	}
	for k, v := range t.ToolCounts {
		s.ToolsInvoked[k] = v
	}
	if !t.First.IsZero() {
		s.StartedAt = t.First.UTC().Format(time.RFC3339Nano)
	}
	if !t.Last.IsZero() {
		s.EndedAt = t.Last.UTC().Format(time.RFC3339Nano)
	}
	return s
}
