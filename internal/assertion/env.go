package assertion

import (
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Trajectory summarises the execution events of one plan for the built-in
// values and functions.
type Trajectory struct {
	// StepCount is the number of STEP_COMPLETE events (step_count).
	StepCount int
	// EscalationCount is the number of ESCALATION events (escalation_count).
	EscalationCount int
	// ErrorCount is the number of TOOL_RESULT events whose status is not
	// SUCCESS (error_count).
	ErrorCount int
	// ToolCounts maps a tool name to its number of TOOL_REQUEST events
	// (tool_invoked, tool_count).
	ToolCounts map[string]int
	// First and Last are the earliest and latest event timestamps; both are
	// zero when there were no events.
	First, Last time.Time
	// ToolSequence is the tool of every TOOL_REQUEST, in order
	// (tool_sequence and the trajectory matchers); ToolArgs the argument
	// object of each, per tool, in order (tool_args). At most
	// MaxToolSequence are kept; beyond, SequenceTruncated is set and the
	// functions that read them fail rather than answer on part of it.
	ToolSequence      []string
	ToolArgs          map[string][]any
	SequenceTruncated bool
	// ArgsTruncated is set when the arguments kept passed MaxToolArgsBytes
	// (tool_args then fails).
	ArgsTruncated bool
}

// MaxToolSequence bounds the tool calls a trajectory keeps in order, and
// MaxToolArgsBytes the JSON of the arguments it keeps (the aggregate is
// rewritten with every event and must stay small).
const (
	MaxToolSequence  = 1000
	MaxToolArgsBytes = 64 << 10
)

// DurationSeconds returns Last minus First in seconds (duration_seconds),
// or 0 when either is unset or Last is before First.
func (t Trajectory) DurationSeconds() float64 {
	if t.First.IsZero() || t.Last.IsZero() || t.Last.Before(t.First) {
		return 0
	}
	return t.Last.Sub(t.First).Seconds()
}

// Observation is one OUTCOME observation: the value that the call Call with
// arguments Args returned, as reported by the agent or its tools.
type Observation struct {
	Call  string `json:"call"`  // the function name used in assertions
	Args  []any  `json:"args"`  // its arguments, compared by JSON value
	Value any    `json:"value"` // what the call returned
}

// Watcher answers the watcher functions expectation_state(id) and
// lapse_count(kind) from the expectations watcher. Implementations must be
// safe for concurrent use if one Env is evaluated from several goroutines.
type Watcher interface {
	// ExpectationState returns the state of the expectation with the given
	// id, and false when the watcher does not know it.
	ExpectationState(id string) (string, bool)
	// LapseCount returns the number of lapses of the given kind (overdue,
	// skipped, stalled), or of every kind when kind is "".
	LapseCount(kind string) int
}

// Env is everything an assertion can read about one execution: the
// trajectory, the OUTCOME variables and observations and, optionally, a
// Watcher. Build it once per execution with NewEnv and evaluate any number
// of programs against it, from any number of goroutines; it is read-only
// after NewEnv. A nil *Env behaves as an execution with no events and no
// OUTCOME.
type Env struct {
	traj    Trajectory
	vars    map[string]any
	obs     map[string][]observation
	watcher Watcher
	m       map[string]any // the expr environment, bound to this Env
}

type observation struct {
	args  []any
	value any
}

// NewEnv builds an Env. Variables and observation arguments and values are
// normalised to their JSON form (numbers become float64, structs become
// maps), so values decoded from JSON and values built in Go behave alike.
// For observations with the same call and equal arguments the later one in
// the slice wins. The inputs are not retained beyond what NewEnv copies;
// w may be nil.
func NewEnv(t Trajectory, variables map[string]any, observations []Observation, w Watcher) *Env {
	e := &Env{
		traj:    t,
		vars:    make(map[string]any, len(variables)),
		obs:     make(map[string][]observation, len(observations)),
		watcher: w,
	}
	e.traj.ToolCounts = make(map[string]int, len(t.ToolCounts))
	for k, v := range t.ToolCounts {
		e.traj.ToolCounts[k] = v
	}
	for k, v := range variables {
		e.vars[k] = normalize(v)
	}
	for _, o := range observations {
		args := make([]any, len(o.Args))
		for i, a := range o.Args {
			args[i] = normalize(a)
		}
		e.obs[o.Call] = append(e.obs[o.Call], observation{args: args, value: normalize(o.Value)})
	}
	e.m = e.exprEnv()
	return e
}

// Trajectory returns the trajectory the Env was built from.
func (e *Env) Trajectory() Trajectory {
	if e == nil {
		return Trajectory{}
	}
	return e.traj
}

// Variables returns a copy of the normalised OUTCOME variables.
func (e *Env) Variables() map[string]any {
	out := map[string]any{}
	if e == nil {
		return out
	}
	for k, v := range e.vars {
		out[k] = v
	}
	return out
}

// Value returns the value of a bare name as an assertion sees it: a
// built-in value or an OUTCOME variable; ok is false when it is neither.
func (e *Env) Value(name string) (v any, ok bool) {
	if e == nil {
		e = emptyEnv
	}
	switch name {
	case "step_count":
		return e.traj.StepCount, true
	case "escalation_count":
		return e.traj.EscalationCount, true
	case "error_count":
		return e.traj.ErrorCount, true
	case "duration_seconds":
		return e.traj.DurationSeconds(), true
	case "tool_sequence":
		if e.traj.SequenceTruncated {
			return nil, false
		}
		return e.toolSequence(), true
	}
	v, ok = e.vars[name]
	return v, ok
}

// Observe returns the value of the observation call(args...), comparing
// arguments by JSON value; ok is false when there is none.
func (e *Env) Observe(call string, args ...any) (v any, ok bool) {
	if e == nil {
		return nil, false
	}
	list := e.obs[call]
	for i := len(list) - 1; i >= 0; i-- {
		o := list[i]
		if len(o.args) != len(args) {
			continue
		}
		match := true
		for j := range args {
			if !equalJSON(args[j], o.args[j]) {
				match = false
				break
			}
		}
		if match {
			return o.value, true
		}
	}
	return nil, false
}

var emptyEnv = NewEnv(Trajectory{}, nil, nil, nil)

// Internal names of the rewritten tree; user names with this prefix are
// rejected at compile time.
const (
	fnVar        = "__var"
	fnObs        = "__obs"  // any number of arguments: (name, args...)
	fnObs0       = "__obs0" // no arguments: (name)
	fnObs1       = "__obs1" // one argument: (name, arg)
	fnToolInv    = "__tool_invoked"
	fnToolCount  = "__tool_count"
	fnExpState   = "__expectation_state"
	fnLapseCount = "__lapse_count"
	fnToolSeq    = "__tool_sequence"
	fnTrajExact  = "__trajectory_exact"
	fnTrajOrder  = "__trajectory_in_order"
	fnTrajAny    = "__trajectory_any_order"
	fnToolF1     = "__tool_call_f1"
	fnToolArgs   = "__tool_args"
	fnAdd        = "__add"    // a + that may concatenate: (any, any) any
	fnConcat     = "__concat" // a + of two strings: (string, string) string
)

// builtinValues are the bare names that are not OUTCOME variables.
var builtinValues = map[string]bool{
	"step_count": true, "escalation_count": true, "error_count": true, "duration_seconds": true,
	"tool_sequence": true,
}

// builtinFuncs maps a built-in function to its internal name and its
// accepted argument counts.
var builtinFuncs = map[string]struct {
	internal string
	min, max int
}{
	"tool_invoked":         {fnToolInv, 1, 1},
	"tool_count":           {fnToolCount, 1, 1},
	"expectation_state":    {fnExpState, 1, 1},
	"lapse_count":          {fnLapseCount, 0, 1},
	"trajectory_exact":     {fnTrajExact, 1, 1},
	"trajectory_in_order":  {fnTrajOrder, 1, 1},
	"trajectory_any_order": {fnTrajAny, 1, 1},
	"tool_call_f1":         {fnToolF1, 1, 1},
	"tool_args":            {fnToolArgs, 1, 1},
}

// prototypeEnv gives the checker the types of every environment entry.
var prototypeEnv = map[string]any{
	"step_count":       0,
	"escalation_count": 0,
	"error_count":      0,
	"duration_seconds": 0.0,
	fnVar:              func(any) any { return nil },
	fnObs:              func(...any) any { return nil },
	fnObs0:             func(any) any { return nil },
	fnObs1:             func(any, any) any { return nil },
	fnToolInv:          func(any) bool { return false },
	fnToolCount:        func(any) int { return 0 },
	fnExpState:         func(any) string { return "" },
	fnLapseCount:       func(any) int { return 0 },
	fnToolSeq:          func() []any { return nil },
	fnTrajExact:        func(any) bool { return false },
	fnTrajOrder:        func(any) bool { return false },
	fnTrajAny:          func(any) bool { return false },
	fnToolF1:           func(any) float64 { return 0 },
	fnToolArgs:         func(any) []any { return nil },
	fnAdd:              boundedAdd,
	fnConcat:           boundedConcat,
}

// exprEnv returns the expr environment of e; its functions panic with an
// *EvalError, which the VM turns into an error.
func (e *Env) exprEnv() map[string]any {
	return map[string]any{
		"step_count":       e.traj.StepCount,
		"escalation_count": e.traj.EscalationCount,
		"error_count":      e.traj.ErrorCount,
		"duration_seconds": e.traj.DurationSeconds(),
		fnToolSeq: func() []any {
			e.sequence("tool_sequence")
			return e.toolSequence()
		},
		fnTrajExact: func(want any) bool { return e.trajectory("trajectory_exact", want, exactly) },
		fnTrajOrder: func(want any) bool { return e.trajectory("trajectory_in_order", want, inOrder) },
		fnTrajAny:   func(want any) bool { return e.trajectory("trajectory_any_order", want, anyOrder) },
		fnToolF1: func(want any) float64 {
			return toolCallF1(e.sequence("tool_call_f1"), toolList("tool_call_f1", want))
		},
		fnToolArgs: func(name any) []any {
			e.sequence("tool_args")
			if e.traj.ArgsTruncated {
				panic(&EvalError{Kind: TypeMismatch, Name: "tool_args",
					Message: fmt.Sprintf("tool_args needs every call's arguments, and the plan's came to more than %d bytes", MaxToolArgsBytes)})
			}
			out := []any{}
			return append(out, e.traj.ToolArgs[toolName("tool_args", name)]...)
		},
		fnAdd:    boundedAdd,
		fnConcat: boundedConcat,
		fnVar: func(name any) any {
			s, _ := name.(string)
			v, ok := e.vars[s]
			if !ok {
				panic(&EvalError{Kind: MissingVariable, Name: s,
					Message: fmt.Sprintf("OUTCOME variable %q is missing", s)})
			}
			return v
		},
		// The observation functions are split by arity so that calls with
		// zero or one argument use expr's typed, allocation-free call path.
		fnObs: func(in ...any) any {
			if len(in) == 0 {
				panic(&EvalError{Kind: TypeMismatch, Message: "internal: observation call without a name"})
			}
			return e.mustObserve(in[0], in[1:])
		},
		fnObs0: func(name any) any {
			return e.mustObserve(name, nil)
		},
		fnObs1: func(name, arg any) any {
			var one [1]any
			one[0] = arg
			return e.mustObserve(name, one[:])
		},
		fnToolInv: func(name any) bool {
			return e.traj.ToolCounts[toolName("tool_invoked", name)] > 0
		},
		fnToolCount: func(name any) int {
			return e.traj.ToolCounts[toolName("tool_count", name)]
		},
		fnExpState: func(id any) string {
			s, ok := id.(string)
			if !ok {
				panic(&EvalError{Kind: TypeMismatch, Name: "expectation_state",
					Message: fmt.Sprintf("expectation_state expects a string id, got %s", typeName(id))})
			}
			if e.watcher == nil {
				panic(&EvalError{Kind: NoWatcher, Name: "expectation_state",
					Message: "expectation_state needs the expectations watcher, and none is attached"})
			}
			state, ok := e.watcher.ExpectationState(s)
			if !ok {
				panic(&EvalError{Kind: MissingExpectation, Name: s,
					Message: fmt.Sprintf("expectation %q is unknown to the watcher", s)})
			}
			return state
		},
		fnLapseCount: func(kind any) int {
			s, ok := kind.(string)
			if !ok {
				panic(&EvalError{Kind: TypeMismatch, Name: "lapse_count",
					Message: fmt.Sprintf("lapse_count expects a string kind, got %s", typeName(kind))})
			}
			if e.watcher == nil {
				panic(&EvalError{Kind: NoWatcher, Name: "lapse_count",
					Message: "lapse_count needs the expectations watcher, and none is attached"})
			}
			return e.watcher.LapseCount(s)
		},
	}
}

// mustObserve returns the observation call(args...) or panics with a
// MissingObservation *EvalError.
func (e *Env) mustObserve(name any, args []any) any {
	call, _ := name.(string)
	v, ok := e.Observe(call, args...)
	if !ok {
		panic(&EvalError{Kind: MissingObservation, Name: call,
			Message: "OUTCOME observation " + describeCall(call, args) + " is missing"})
	}
	return v
}

// recorder collects what a traced evaluation read.
type recorder struct {
	seen map[string]bool // what was read already (a name, or a call with its arguments)
	list []string
}

func (r *recorder) add(what string, v any) {
	// A name (or a call with its arguments) reads the same value every time
	// within one evaluation: record it once, and encode only as much of a
	// long string as the trace keeps, so tracing costs no more than
	// evaluating.
	if r.seen[what] {
		return
	}
	r.seen[what] = true
	if str, ok := v.(string); ok && len(str) > 256 {
		cut := 256
		for cut > 0 && !utf8.RuneStart(str[cut]) {
			cut--
		}
		v = str[:cut]
	}
	j, err := json.Marshal(normalize(v))
	s := what + "=" + string(j)
	if err != nil {
		s = fmt.Sprintf("%s=%v", what, v)
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	r.list = append(r.list, s)
}

// tracingEnv returns an expr environment like e.m whose lookups also
// record what they return in rec.
func (e *Env) tracingEnv(rec *recorder) map[string]any {
	m := make(map[string]any, len(e.m))
	for k, v := range e.m {
		m[k] = v
	}
	obs := func(name any, args []any) any {
		v := e.mustObserve(name, args)
		call, _ := name.(string)
		rec.add(describeCall(call, args), v)
		return v
	}
	varFn := e.m[fnVar].(func(any) any)
	m[fnVar] = func(name any) any {
		v := varFn(name)
		s, _ := name.(string)
		rec.add(s, v)
		return v
	}
	m[fnObs] = func(in ...any) any {
		if len(in) == 0 {
			panic(&EvalError{Kind: TypeMismatch, Message: "internal: observation call without a name"})
		}
		return obs(in[0], in[1:])
	}
	m[fnObs0] = func(name any) any { return obs(name, nil) }
	m[fnObs1] = func(name, arg any) any { return obs(name, []any{arg}) }
	inv := e.m[fnToolInv].(func(any) bool)
	m[fnToolInv] = func(name any) bool {
		v := inv(name)
		s, _ := name.(string)
		rec.add(describeCall("tool_invoked", []any{s}), v)
		return v
	}
	cnt := e.m[fnToolCount].(func(any) int)
	m[fnToolCount] = func(name any) int {
		v := cnt(name)
		s, _ := name.(string)
		rec.add(describeCall("tool_count", []any{s}), v)
		return v
	}
	st := e.m[fnExpState].(func(any) string)
	m[fnExpState] = func(id any) string {
		v := st(id)
		rec.add(describeCall("expectation_state", []any{id}), v)
		return v
	}
	for _, fn := range []struct{ internal, name string }{{fnTrajExact, "trajectory_exact"}, {fnTrajOrder, "trajectory_in_order"}, {fnTrajAny, "trajectory_any_order"}} {
		f := e.m[fn.internal].(func(any) bool)
		name := fn.name
		m[fn.internal] = func(want any) bool {
			v := f(want)
			rec.add(describeCall(name, []any{want}), v)
			return v
		}
	}
	seqFn := e.m[fnToolSeq].(func() []any)
	m[fnToolSeq] = func() []any {
		v := seqFn()
		rec.add("tool_sequence", v)
		return v
	}
	f1 := e.m[fnToolF1].(func(any) float64)
	m[fnToolF1] = func(want any) float64 {
		v := f1(want)
		rec.add(describeCall("tool_call_f1", []any{want}), v)
		return v
	}
	ta := e.m[fnToolArgs].(func(any) []any)
	m[fnToolArgs] = func(name any) []any {
		v := ta(name)
		rec.add(describeCall("tool_args", []any{name}), v)
		return v
	}
	lc := e.m[fnLapseCount].(func(any) int)
	m[fnLapseCount] = func(kind any) int {
		v := lc(kind)
		if s, _ := kind.(string); s == "" {
			rec.add("lapse_count()", v)
		} else {
			rec.add(describeCall("lapse_count", []any{kind}), v)
		}
		return v
	}
	return m
}
