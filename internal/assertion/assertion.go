package assertion

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"
)

// Limits of an assertion's source.
const (
	// MaxSourceLen is the longest accepted source, in bytes.
	MaxSourceLen = 4096
	// MaxNodes is the largest accepted syntax tree, in nodes, as counted by
	// expr's parser before any rewriting.
	MaxNodes = 512
)

// MaxValueLen is the longest string, in bytes, that an assertion may build
// with +. A concatenation whose result would be longer fails with a
// TooLarge *EvalError, so that what an evaluation copies is bounded
// whatever the OUTCOME data: at most MaxNodes concatenations of at most
// MaxValueLen bytes each.
const MaxValueLen = 64 << 10

// Program is a compiled assertion. It is immutable and safe for concurrent
// use; compile it once and evaluate it against many Envs.
type Program struct {
	src     string
	prog    *vm.Program
	names   []string // bare names read: built-in values and variables
	calls   []string // observation calls made
	watcher bool     // uses expectation_state or lapse_count
}

// CompileError is returned by Compile for a source that is too long, does
// not parse, uses an unsupported construct or does not type-check as a
// boolean. Line and Column are 1-based and 0 when unknown.
type CompileError struct {
	Message string // what is wrong, on one line
	Line    int    // 1-based line, 0 when unknown
	Column  int    // 1-based column in runes, 0 when unknown
}

// Error returns the message with its position on one line.
func (e *CompileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s (line %d, column %d)", e.Message, e.Line, e.Column)
	}
	return e.Message
}

// EvalErrorKind classifies an *EvalError.
type EvalErrorKind string

// Kinds of evaluation errors.
const (
	MissingVariable    EvalErrorKind = "missing_variable"    // an OUTCOME variable is absent
	MissingObservation EvalErrorKind = "missing_observation" // no observation for a call and its arguments
	MissingExpectation EvalErrorKind = "missing_expectation" // expectation_state(id) of an unknown id
	NoWatcher          EvalErrorKind = "no_watcher"          // a watcher function without a Watcher
	TypeMismatch       EvalErrorKind = "type_mismatch"       // an operation on values of the wrong type
	NotBoolean         EvalErrorKind = "not_boolean"         // the result is not a boolean
	TooLarge           EvalErrorKind = "too_large"           // a concatenation longer than MaxValueLen
)

// EvalError is the only error type Eval returns. Message is a complete
// sentence fit for a VERIFY result's evidence; Name is the variable, call,
// function or expectation involved, when there is one.
type EvalError struct {
	Kind    EvalErrorKind // the class of error
	Name    string        // what is involved, when there is one thing
	Message string        // a sentence naming what is missing or wrong
}

// Error returns the message.
func (e *EvalError) Error() string { return e.Message }

// Compile parses and type-checks src once. It returns a *CompileError when
// src is empty, longer than MaxSourceLen bytes, not valid UTF-8, larger
// than MaxNodes nodes, syntactically invalid, uses a construct outside the
// language (see the package documentation), calls a built-in with the
// wrong number of arguments, uses a built-in function as a value, or cannot
// yield a boolean. Compile never panics.
func Compile(src string) (p *Program, err error) {
	// The same criteria come back plan after plan (each plan declares its
	// ANTICIPATE, whose assertions an agent rarely changes), and a
	// compiled Program is immutable: compile each source once.
	if p, ok := compiledCache.get(src); ok {
		return p, nil
	}
	p, err = compile(src)
	if err == nil {
		compiledCache.put(src, p)
	}
	return p, err
}

// compiledCache holds the Programs compiled lately, by source.
var compiledCache = programCache{m: map[string]*Program{}}

// programCacheSize bounds the cache: at most this many sources (each at
// most MaxSourceLen bytes) are kept, and it is emptied when full.
const programCacheSize = 1024

type programCache struct {
	mu sync.RWMutex
	m  map[string]*Program
}

func (c *programCache) get(src string) (*Program, bool) {
	c.mu.RLock()
	p, ok := c.m[src]
	c.mu.RUnlock()
	return p, ok
}

func (c *programCache) put(src string, p *Program) {
	c.mu.Lock()
	if len(c.m) >= programCacheSize {
		clear(c.m)
	}
	c.m[src] = p
	c.mu.Unlock()
}

func compile(src string) (p *Program, err error) {
	switch {
	case strings.TrimSpace(src) == "":
		return nil, &CompileError{Message: "assertion is empty"}
	case len(src) > MaxSourceLen:
		return nil, &CompileError{Message: fmt.Sprintf("assertion is longer than %d bytes", MaxSourceLen)}
	case !utf8.ValidString(src):
		return nil, &CompileError{Message: "assertion is not valid UTF-8"}
	}
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, &CompileError{Message: fmt.Sprintf("assertion could not be compiled: %v", r)}
		}
	}()

	calls := &callRewriter{}
	names := &nameRewriter{}
	opts := append([]expr.Option{
		expr.Env(prototypeEnv),
		expr.DisableAllBuiltins(),
		expr.MaxNodes(MaxNodes),
	}, predicateOverrides...)
	opts = append(opts, expr.Patch(calls), expr.Patch(names), expr.Patch(addRewriter{}))
	prog, cerr := expr.Compile(normalizeKeywords(src), opts...)
	// The rewriters' own errors come first: expr type-checks before and
	// between patches, and its messages about names we have not rewritten
	// yet would only confuse.
	if calls.err != nil {
		return nil, calls.err.in(src)
	}
	if names.err != nil {
		return nil, names.err.in(src)
	}
	if cerr != nil {
		return nil, compileError(cerr)
	}
	// The result must be able to be a boolean. expr.AsBool would check this
	// too, but it also appends a cast that turns nil into false; Eval checks
	// the run-time type itself instead.
	if t := prog.Node().Type(); t != nil && t.Kind() != reflect.Bool && t.Kind() != reflect.Interface {
		return nil, &CompileError{Message: "assertion must be a boolean expression, but its result is " +
			jsonTypeName(t.String())}
	}
	return &Program{
		src:     src,
		prog:    prog,
		names:   sortedKeys(names.names),
		calls:   sortedKeys(calls.calls),
		watcher: calls.watcher,
	}, nil
}

// predicateOverrides declares expr's predicate names (count, sum, map,
// ...) as functions so that its parser reads count(x) as an ordinary call,
// which the call rewriter then turns into an observation lookup. The stub
// is never called: every call is rewritten before compilation.
var predicateOverrides = func() []expr.Option {
	stub := func(...any) (any, error) { return nil, errors.New("unreachable") }
	var opts []expr.Option
	for _, name := range []string{"all", "none", "any", "one", "filter", "map", "count", "sum",
		"find", "findIndex", "findLast", "findLastIndex", "groupBy", "sortBy", "reduce"} {
		opts = append(opts, expr.Function(name, stub))
	}
	return opts
}()

// compileError converts an expr error into a one-line *CompileError.
func compileError(err error) *CompileError {
	ce := &CompileError{Message: err.Error()}
	var fe *file.Error
	if errors.As(err, &fe) {
		ce.Message, ce.Line, ce.Column = fe.Message, fe.Line, fe.Column+1
		if fe.Snippet == "" {
			ce.Line, ce.Column = 0, 0
		}
	}
	if i := strings.Index(ce.Message, "expected bool, but got "); i >= 0 {
		ce.Message = "assertion must be a boolean expression, but its result is " +
			jsonTypeName(ce.Message[i+len("expected bool, but got "):])
	}
	if i := strings.IndexByte(ce.Message, '\n'); i >= 0 {
		ce.Message = ce.Message[:i]
	}
	return ce
}

// jsonTypeName names a Go type as a JSON reader would.
func jsonTypeName(goType string) string {
	switch goType {
	case "int", "int64", "float64", "float32", "uint", "int32":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "<nil>", "nil":
		return "nil"
	case "[]interface {}", "[]any":
		return "an array"
	case "map[string]interface {}", "map[string]any":
		return "an object"
	}
	return goType
}

// Source returns the source the program was compiled from.
func (p *Program) Source() string {
	if p == nil {
		return ""
	}
	return p.src
}

// Names returns the bare names the assertion reads (built-in values and
// OUTCOME variables), sorted; useful for evidence.
func (p *Program) Names() []string {
	if p == nil {
		return nil
	}
	return append([]string(nil), p.names...)
}

// Calls returns the observation calls the assertion may make, sorted.
func (p *Program) Calls() []string {
	if p == nil {
		return nil
	}
	return append([]string(nil), p.calls...)
}

// UsesWatcher reports whether the assertion calls expectation_state or
// lapse_count.
func (p *Program) UsesWatcher() bool { return p != nil && p.watcher }

var vmPool = sync.Pool{New: func() any { return new(vm.VM) }}

// Eval evaluates the program against env (nil means an empty execution).
// It returns the boolean result, or an *EvalError when a variable,
// observation, expectation or watcher is missing, an operation meets values
// of the wrong type, a concatenation would be longer than MaxValueLen, or
// the result is not a boolean. Eval never panics and does not allocate on
// the success path beyond what the assertion's own operations need.
func (p *Program) Eval(env *Env) (result bool, err error) {
	if p == nil || p.prog == nil {
		return false, &EvalError{Kind: TypeMismatch, Message: "assertion is not compiled"}
	}
	if env == nil {
		env = emptyEnv
	}
	machine := vmPool.Get().(*vm.VM)
	defer func() {
		if r := recover(); r != nil {
			// The VM recovers its own panics; this guards against anything
			// else and drops the machine, whose state is unknown.
			result, err = false, &EvalError{Kind: TypeMismatch, Message: fmt.Sprintf("assertion failed to evaluate: %v", r)}
			return
		}
		vmPool.Put(machine)
	}()
	out, rerr := machine.Run(p.prog, env.m)
	if rerr != nil {
		return false, evalError(rerr)
	}
	b, ok := out.(bool)
	if !ok {
		return false, &EvalError{Kind: NotBoolean,
			Message: fmt.Sprintf("assertion evaluated to %s, not a boolean", typeName(out))}
	}
	return b, nil
}

// EvalTrace is Eval that also returns what the assertion read, in
// evaluation order and without repeats, as name=JSON pairs: built-in
// values, variables (step_count=4, target_username="alice"), observations
// (user_exists("alice")=true) and watcher answers. It is meant for
// evidence; it allocates, so use Eval on hot paths. Errors are as for Eval.
func (p *Program) EvalTrace(env *Env) (result bool, trace []string, err error) {
	if p == nil || p.prog == nil {
		return false, nil, &EvalError{Kind: TypeMismatch, Message: "assertion is not compiled"}
	}
	if env == nil {
		env = emptyEnv
	}
	rec := &recorder{seen: map[string]bool{}}
	m := env.tracingEnv(rec)
	defer func() {
		if r := recover(); r != nil {
			result, trace, err = false, rec.list, &EvalError{Kind: TypeMismatch, Message: fmt.Sprintf("assertion failed to evaluate: %v", r)}
		}
	}()
	var machine vm.VM
	out, rerr := machine.Run(p.prog, m)
	if rerr != nil {
		return false, rec.list, evalError(rerr)
	}
	// Built-in values are plain map entries, so they are not seen by the
	// recorder; add the ones the assertion names.
	for _, n := range p.names {
		if builtinValues[n] {
			v, _ := env.Value(n)
			rec.add(n, v)
		}
	}
	b, ok := out.(bool)
	if !ok {
		return false, rec.list, &EvalError{Kind: NotBoolean,
			Message: fmt.Sprintf("assertion evaluated to %s, not a boolean", typeName(out))}
	}
	return b, rec.list, nil
}

// evalError converts a VM error into an *EvalError.
func evalError(err error) *EvalError {
	var ee *EvalError
	if errors.As(err, &ee) {
		return ee
	}
	msg := err.Error()
	var fe *file.Error
	if errors.As(err, &fe) {
		msg = fe.Message
		// Logical operators cast their operands: "invalid operation:
		// bool(float64)".
		if rest, ok := strings.CutPrefix(msg, "invalid operation: bool("); ok {
			return &EvalError{Kind: NotBoolean, Message: fmt.Sprintf(
				"assertion needs a boolean (as its result or as an operand of AND, OR or NOT) but got %s",
				jsonTypeName(strings.TrimSuffix(rest, ")")))}
		}
		if strings.Contains(msg, "interface conversion") && strings.Contains(msg, "not bool") {
			return &EvalError{Kind: NotBoolean,
				Message: "assertion needs a boolean as an operand of AND, OR or NOT but got another type"}
		}
		if fe.Snippet != "" {
			msg = fmt.Sprintf("%s (line %d, column %d)", msg, fe.Line, fe.Column+1)
		}
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return &EvalError{Kind: TypeMismatch, Message: "assertion failed to evaluate: " + msg}
}
