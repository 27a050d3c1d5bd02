package anticipate

import (
	"encoding/json"
	"fmt"
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

// Tool result statuses. error_count counts every TOOL_RESULT whose status
// is not ToolSuccess.
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

// Event is a validated execution event of a plan. Raw is the event exactly
// as received; the chain digest covers Raw. Obtain one from ValidateEvent.
type Event struct {
	EventID         string                  `json:"event_id"`                    // unique per plan; repeats are idempotent
	EventType       EventType               `json:"event_type"`                  // one of the six event types
	PlanID          string                  `json:"plan_id,omitempty"`           // the plan; see BindPlan
	Timestamp       string                  `json:"timestamp"`                   // RFC 3339, as sent
	Tool            string                  `json:"tool,omitempty"`              // TOOL_REQUEST, TOOL_RESULT
	Arguments       json.RawMessage         `json:"arguments,omitempty"`         // TOOL_REQUEST: a JSON object
	Status          string                  `json:"status,omitempty"`            // TOOL_RESULT: SUCCESS, ERROR, TIMEOUT, DENIED
	Variables       map[string]any          `json:"variables,omitempty"`         // OUTCOME: assertion variables
	Observations    []assertion.Observation `json:"observations,omitempty"`      // OUTCOME: observed call results
	ScopeEnvelopeID string                  `json:"scope_envelope_id,omitempty"` // optional context
	SessionID       string                  `json:"session_id,omitempty"`        // optional context
	AgentID         string                  `json:"agent_id,omitempty"`          // optional context

	// Raw is the event as received.
	Raw json.RawMessage `json:"-"`
	// At is Timestamp parsed, in UTC.
	At time.Time `json:"-"`
}

var commonEventFields = []string{"event_id", "event_type", "plan_id", "timestamp",
	"scope_envelope_id", "session_id", "agent_id"}

var eventFields = map[EventType][]string{
	ToolRequest:  {"tool", "arguments"},
	ToolResult:   {"tool", "status"},
	StepComplete: nil,
	Escalation:   nil,
	Outcome:      {"variables", "observations"},
	PlanComplete: nil,
}

// SealsOn reports whether storing an event of type t seals every
// ANTICIPATE bound to its plan: true for TOOL_REQUEST and STEP_COMPLETE
// (RFC-032 section 3.5), false for every other value.
func SealsOn(t EventType) bool {
	return t == ToolRequest || t == StepComplete
}

// ValidateEvent decodes and validates an execution event. It returns an
// *errs.Error with Code errs.Invalid, naming each failing field by JSON
// path, when raw is not a canonicalizable JSON object; event_id, event_type
// or timestamp is missing; event_type is not one of the six types; the
// timestamp is not RFC 3339; an id is empty, longer than 128 bytes or has
// control characters; a field is unknown or not allowed on that event type
// (TOOL_REQUEST: tool, arguments; TOOL_RESULT: tool, status; OUTCOME:
// variables, observations; the others none beyond the common ones);
// TOOL_REQUEST or TOOL_RESULT lacks tool; TOOL_RESULT lacks status or it is
// not SUCCESS, ERROR, TIMEOUT or DENIED; arguments or variables is not an
// object; or an observation lacks call or value, has args that are not an
// array, or the limits on variables and observations are exceeded.
// plan_id is optional because the plan is usually named by the URL; see
// BindPlan.
func ValidateEvent(raw []byte) (*Event, error) {
	if _, err := Canonical(raw); err != nil {
		return nil, err
	}
	var c errs.Collector
	o, ok := decodeObject(&c, "", raw, true)
	if !ok {
		return nil, errs.E(errs.Invalid, "an execution event must be a JSON object")
	}
	e := &Event{Raw: append(json.RawMessage(nil), raw...)}
	e.EventID = o.id("event_id", true)
	e.EventType = EventType(o.enum("event_type", string(ToolRequest), string(ToolResult),
		string(StepComplete), string(Escalation), string(Outcome), string(PlanComplete)))
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
	if extra, known := eventFields[e.EventType]; known {
		allowed := append(append([]string(nil), commonEventFields...), extra...)
		for k := range o.m {
			if !contains(allowed, k) && contains(allFields(), k) {
				c.Add(k, "is not allowed on a %s event", e.EventType)
				delete(o.m, k)
			}
		}
		o.only(allowed...)
	} else {
		o.only(allFields()...)
	}

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
		e.Status = o.enum("status", ToolSuccess, ToolError, ToolTimeout, ToolDenied)
	case Outcome:
		e.Variables = decodeVariables(&c, o)
		e.Observations = decodeObservations(&c, o)
	}
	if err := c.Err("invalid execution event"); err != nil {
		return nil, err
	}
	return e, nil
}

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
