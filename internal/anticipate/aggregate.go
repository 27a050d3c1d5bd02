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
	// Chunks counts the chunks spilled (Spill): the tool counts,
	// variables and observations above are those folded since the last
	// one. ChunkBytes is about how much of them there is (each value's
	// JSON as added; a replaced one is not taken back).
	Chunks     int `json:"chunks,omitempty"`
	ChunkBytes int `json:"chunk_bytes,omitempty"`
}

// ChunkBytes is how much of the growing part of an aggregate (tool counts,
// variables, observations) the execution item itself holds before Spill
// moves it to an item of its own, so that no item grows with the plan: a
// plan of 10,000 events is kept in many small items, not one that passes
// the store's 400 KB limit. Small, since the execution item is rewritten
// with every event (on DynamoDB a write unit per KB, twice in the
// event's transaction).
const ChunkBytes = 16 << 10

// Chunk is a spilled part of an aggregate: the tool counts, variables and
// observations folded from a run of events.
type Chunk struct {
	ToolCounts   map[string]int          `json:"tool_counts,omitempty"`
	Variables    map[string]any          `json:"variables,omitempty"`
	Observations []assertion.Observation `json:"observations,omitempty"`
}

// Spill returns the growing part folded so far and empties it, counting a
// chunk, once it holds ChunkBytes or more (ok false: not yet). The caller
// stores the chunk, number a.Chunks, before the aggregate.
func (a *Aggregate) Spill() (Chunk, bool) {
	if a.ChunkBytes < ChunkBytes {
		return Chunk{}, false
	}
	c := Chunk{ToolCounts: a.ToolCounts, Variables: a.Variables, Observations: a.Observations}
	a.ToolCounts, a.Variables, a.Observations, a.ChunkBytes = nil, nil, nil, 0
	a.Chunks++
	return c, true
}

// WithChunks returns the aggregate with its spilled chunks (in the order
// they were spilled) folded in before its own growing part: what folding
// every event into one aggregate would have given.
func (a Aggregate) WithChunks(chunks []Chunk) Aggregate {
	if len(chunks) == 0 {
		return a
	}
	full := a
	full.ToolCounts, full.Variables, full.Observations = nil, nil, nil
	// Observations replace an earlier one of the same call and arguments:
	// found by key here, not by observe's scan (a long plan has many).
	at := map[string]int{}
	merge := func(c Chunk) {
		for k, n := range c.ToolCounts {
			if full.ToolCounts == nil {
				full.ToolCounts = map[string]int{}
			}
			full.ToolCounts[k] += n
		}
		for k, v := range c.Variables {
			if full.Variables == nil {
				full.Variables = map[string]any{}
			}
			full.Variables[k] = v
		}
		for _, o := range c.Observations {
			args, _ := json.Marshal(o.Args)
			key := o.Call + "\x00" + string(args)
			if i, ok := at[key]; ok {
				full.Observations[i] = o
				continue
			}
			at[key] = len(full.Observations)
			full.Observations = append(full.Observations, o)
		}
	}
	for _, c := range chunks {
		merge(c)
	}
	merge(Chunk{ToolCounts: a.ToolCounts, Variables: a.Variables, Observations: a.Observations})
	return full
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
		if a.ToolCounts[e.Tool] == 0 {
			a.ChunkBytes += len(e.Tool) + 8
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
			b, _ := json.Marshal(v)
			a.ChunkBytes += len(k) + len(b) + 8
		}
		for _, o := range e.Observations {
			a.observe(o)
			b, _ := json.Marshal(o)
			a.ChunkBytes += len(b)
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
