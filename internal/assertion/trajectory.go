package assertion

// The trajectory functions of the assertion language: tool_sequence,
// trajectory_exact, trajectory_in_order, trajectory_any_order, tool_call_f1
// and tool_args, over the tools of a plan's TOOL_REQUEST events in order.

import (
	"fmt"
)

// toolSequence is tool_sequence as a list value (callers check that it
// is whole first: sequence).
func (e *Env) toolSequence() []any {
	out := make([]any, 0, len(e.traj.ToolSequence))
	for _, t := range e.traj.ToolSequence {
		out = append(out, t)
	}
	return out
}

// sequence returns the tool sequence, or fails the evaluation when the
// trajectory kept only part of it.
func (e *Env) sequence(fn string) []string {
	if e.traj.SequenceTruncated {
		panic(&EvalError{Kind: TypeMismatch, Name: fn,
			Message: fmt.Sprintf("%s needs the plan's tool calls in order, and the plan made more than %d", fn, MaxToolSequence)})
	}
	return e.traj.ToolSequence
}

func (e *Env) trajectory(fn string, want any, match func(have, want []string) bool) bool {
	return match(e.sequence(fn), toolList(fn, want))
}

// toolList reads a list of tool names given to a trajectory function.
func toolList(fn string, v any) []string {
	list, ok := v.([]any)
	if !ok {
		panic(&EvalError{Kind: TypeMismatch, Name: fn,
			Message: fmt.Sprintf("%s expects a list of tool names, got %s", fn, typeName(v))})
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			panic(&EvalError{Kind: TypeMismatch, Name: fn,
				Message: fmt.Sprintf("%s expects a list of tool names, and one is %s", fn, typeName(x))})
		}
		out = append(out, s)
	}
	return out
}

// exactly: the sequence is want, no more, no less.
func exactly(have, want []string) bool {
	if len(have) != len(want) {
		return false
	}
	for i := range want {
		if have[i] != want[i] {
			return false
		}
	}
	return true
}

// inOrder: want is a subsequence of have (others may come between).
func inOrder(have, want []string) bool {
	i := 0
	for _, t := range have {
		if i < len(want) && t == want[i] {
			i++
		}
	}
	return i == len(want)
}

// anyOrder: every tool of want occurs in have, as often as want lists it.
func anyOrder(have, want []string) bool {
	count := map[string]int{}
	for _, t := range have {
		count[t]++
	}
	for _, t := range want {
		if count[t] == 0 {
			return false
		}
		count[t]--
	}
	return true
}

// toolCallF1 is the F1 score of the invoked tools (a multiset) against
// the expected multiset: 2PR/(P+R) with P the share of calls expected and
// R the share of expected calls made; 1 when both are empty.
func toolCallF1(have, want []string) float64 {
	if len(have) == 0 && len(want) == 0 {
		return 1
	}
	left := map[string]int{}
	for _, t := range want {
		left[t]++
	}
	match := 0
	for _, t := range have {
		if left[t] > 0 {
			left[t]--
			match++
		}
	}
	if match == 0 {
		return 0
	}
	p, r := float64(match)/float64(len(have)), float64(match)/float64(len(want))
	return 2 * p * r / (p + r)
}

func toolName(fn string, v any) string {
	s, ok := v.(string)
	if !ok {
		panic(&EvalError{Kind: TypeMismatch, Name: fn,
			Message: fmt.Sprintf("%s expects a string tool name, got %s", fn, typeName(v))})
	}
	return s
}
