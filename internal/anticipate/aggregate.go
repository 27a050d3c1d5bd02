package anticipate

import (
	"encoding/json"
	"time"

	"github.com/agentclock/clockwork/internal/assertion"
)

// Aggregate is everything VERIFY needs from a plan's events, folded one
// event at a time as they are stored: the trajectory counts, the first and
// last timestamps, and the OUTCOME variables and observations (a later
// value wins). Kept with the execution and updated in the same commit as
// each event, it makes VERIFY independent of the number of events.
// Folding every event of a plan in storage order gives the same Env as
// BuildEnv over those events.
type Aggregate struct {
	StepCount       int            `json:"step_count"`
	EscalationCount int            `json:"escalation_count"`
	ErrorCount      int            `json:"error_count"`
	ToolCounts      map[string]int `json:"tool_counts,omitempty"`
	// ToolSequence and ToolArgs keep the TOOL_REQUESTs in order (the
	// trajectory matchers, tool_args), at most assertion.MaxToolSequence.
	ToolSequence      []string                `json:"tool_sequence,omitempty"`
	ToolArgs          map[string][]any        `json:"tool_args,omitempty"`
	SequenceTruncated bool                    `json:"sequence_truncated,omitempty"`
	ArgsBytes         int                     `json:"args_bytes,omitempty"`
	ArgsTruncated     bool                    `json:"args_truncated,omitempty"`
	First             time.Time               `json:"first,omitzero"`
	Last              time.Time               `json:"last,omitzero"`
	Variables         map[string]any          `json:"variables,omitempty"`
	Observations      []assertion.Observation `json:"observations,omitempty"`
}

// Add folds one stored event (already validated, not a repeat) into the
// aggregate.
func (a *Aggregate) Add(e *Event) {
	switch e.EventType {
	case StepComplete:
		a.StepCount++
	case Escalation:
		a.EscalationCount++
	case ToolRequest:
		if a.ToolCounts == nil {
			a.ToolCounts = map[string]int{}
		}
		a.ToolCounts[e.Tool]++
		a.ToolSequence, a.ToolArgs, a.SequenceTruncated, a.ArgsBytes, a.ArgsTruncated = appendCall(a.ToolSequence, a.ToolArgs, a.SequenceTruncated, a.ArgsBytes, a.ArgsTruncated, e)
	case ToolResult:
		if e.Status != ToolSuccess {
			a.ErrorCount++
		}
	case Outcome:
		if len(e.Variables) > 0 && a.Variables == nil {
			a.Variables = map[string]any{}
		}
		for k, v := range e.Variables {
			a.Variables[k] = v
		}
		for _, o := range e.Observations {
			a.observe(o)
		}
	}
	if !e.At.IsZero() {
		if a.First.IsZero() || e.At.Before(a.First) {
			a.First = e.At
		}
		if e.At.After(a.Last) {
			a.Last = e.At
		}
	}
}

// observe records o, replacing an earlier observation of the same call
// with the same arguments.
func (a *Aggregate) observe(o assertion.Observation) {
	key, _ := json.Marshal(o.Args)
	for i, prev := range a.Observations {
		if prev.Call != o.Call {
			continue
		}
		if pk, _ := json.Marshal(prev.Args); string(pk) == string(key) {
			a.Observations[i] = o
			return
		}
	}
	a.Observations = append(a.Observations, o)
}

// Trajectory returns the aggregate's trajectory.
func (a *Aggregate) Trajectory() assertion.Trajectory {
	t := assertion.Trajectory{StepCount: a.StepCount, EscalationCount: a.EscalationCount, ErrorCount: a.ErrorCount,
		ToolCounts: map[string]int{}, First: a.First, Last: a.Last,
		ToolSequence: a.ToolSequence, ToolArgs: a.ToolArgs, SequenceTruncated: a.SequenceTruncated, ArgsTruncated: a.ArgsTruncated}
	for k, v := range a.ToolCounts {
		t.ToolCounts[k] = v
	}
	return t
}

// appendCall keeps one TOOL_REQUEST in order: its tool, and its argument
// object (an empty object when it sent none), until MaxToolSequence calls;
// arguments until MaxToolArgsBytes of them (then argsTruncated).
func appendCall(seq []string, args map[string][]any, truncated bool, argBytes int, argsTruncated bool, e *Event) ([]string, map[string][]any, bool, int, bool) {
	if truncated || len(seq) >= assertion.MaxToolSequence {
		return seq, args, true, argBytes, argsTruncated
	}
	if !argsTruncated {
		var a any = map[string]any{}
		if len(e.Arguments) > 0 {
			var v any
			if json.Unmarshal(e.Arguments, &v) == nil {
				a = v
			}
		}
		if argBytes+len(e.Arguments) > assertion.MaxToolArgsBytes {
			argsTruncated = true
		} else {
			if args == nil {
				args = map[string][]any{}
			}
			args[e.Tool] = append(args[e.Tool], a)
			argBytes += len(e.Arguments)
		}
	}
	return append(seq, e.Tool), args, false, argBytes, argsTruncated
}

// Env builds the assertion environment; w may be nil.
func (a *Aggregate) Env(w assertion.Watcher) *assertion.Env {
	return assertion.NewEnv(a.Trajectory(), a.Variables, a.Observations, w)
}
