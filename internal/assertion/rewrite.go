package assertion

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm/runtime"
)

// The rewriters applied to a parsed expression at compile time: calls to
// the built-ins and observations, names to variables, + bounded.

// callRewriter is the first patch: it checks every node against the
// language and rewrites calls. It sees only the user's nodes, because
// ast.Walk is post-order and the nodes it creates are never revisited.
type callRewriter struct {
	err     *patchError
	calls   map[string]bool
	watcher bool
}

func (r *callRewriter) fail(n ast.Node, format string, args ...any) {
	if r.err == nil {
		r.err = &patchError{msg: fmt.Sprintf(format, args...), at: n.Location().From}
	}
}

// patchError is a rewriter's error: a message and the rune offset of the
// node it is about.
type patchError struct {
	msg string
	at  int
}

// in converts e into a *CompileError with the line and column of its offset
// in src.
func (e *patchError) in(src string) *CompileError {
	line, col, runes := 1, 1, 0
	for _, r := range src {
		if runes == e.at {
			break
		}
		runes++
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &CompileError{Message: e.msg, Line: line, Column: col}
}

// Visit checks one node against the language and rewrites calls.
func (r *callRewriter) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.NilNode, *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.StringNode,
		*ast.ConstantNode, *ast.ArrayNode:
	case *ast.IdentifierNode:
		if strings.HasPrefix(n.Value, "__") || strings.HasPrefix(n.Value, "$") {
			r.fail(n, "the name %s is reserved", n.Value)
		}
	case *ast.UnaryNode:
		switch n.Operator {
		case "!", "not", "-", "+":
		default:
			r.fail(n, "the operator %s is not supported in assertions", n.Operator)
		}
	case *ast.BinaryNode:
		switch n.Operator {
		case "or", "||", "and", "&&", "==", "!=", "<", "<=", ">", ">=",
			"in", "contains", "startsWith", "endsWith", "+", "-", "*", "/", "%", "**", "^":
		default:
			r.fail(n, "the operator %s is not supported in assertions", n.Operator)
		}
	case *ast.MemberNode:
		if n.Optional || n.Method {
			r.fail(n, "optional member access and methods are not supported in assertions")
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok {
			r.fail(n, "only named functions can be called, as in name(args)")
			return
		}
		if b, ok := builtinFuncs[id.Value]; ok {
			if len(n.Arguments) < b.min || len(n.Arguments) > b.max {
				if b.min == b.max {
					r.fail(n, "%s takes %d argument, got %d", id.Value, b.min, len(n.Arguments))
				} else {
					r.fail(n, "%s takes %d or %d arguments, got %d", id.Value, b.min, b.max, len(n.Arguments))
				}
				return
			}
			args := n.Arguments
			if id.Value == "lapse_count" && len(args) == 0 {
				args = []ast.Node{&ast.StringNode{Value: ""}}
			}
			if id.Value == "expectation_state" || id.Value == "lapse_count" {
				r.watcher = true
			}
			replace(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: b.internal}, Arguments: args})
			return
		}
		if builtinValues[id.Value] {
			r.fail(n, "%s is a value, not a function; write %s without parentheses", id.Value, id.Value)
			return
		}
		if r.calls == nil {
			r.calls = map[string]bool{}
		}
		r.calls[id.Value] = true
		args := make([]ast.Node, 0, len(n.Arguments)+1)
		args = append(args, &ast.StringNode{Value: id.Value})
		args = append(args, n.Arguments...)
		fn := fnObs
		switch len(n.Arguments) {
		case 0:
			fn = fnObs0
		case 1:
			fn = fnObs1
		}
		replace(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: args})
	default:
		r.fail(n, "%s is not supported in assertions", describeNode(n))
	}
}

// nameRewriter is the second patch: every bare name still in the tree that
// is not a built-in value or one of our internal functions is an OUTCOME
// variable.
type nameRewriter struct {
	err   *patchError
	names map[string]bool
}

// Visit rewrites a bare name into a variable lookup.
func (r *nameRewriter) Visit(node *ast.Node) {
	id, ok := (*node).(*ast.IdentifierNode)
	if !ok || strings.HasPrefix(id.Value, "__") {
		return
	}
	if r.names == nil {
		r.names = map[string]bool{}
	}
	if builtinValues[id.Value] {
		r.names[id.Value] = true
		if id.Value == "tool_sequence" {
			// A call, so that it can fail when the trajectory kept only
			// part of the sequence rather than answer on that part.
			replace(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fnToolSeq}})
		}
		return
	}
	if _, fn := builtinFuncs[id.Value]; fn {
		if r.err == nil {
			r.err = &patchError{msg: fmt.Sprintf("%s is a function; call it as %s(...)", id.Value, id.Value),
				at: id.Location().From}
		}
		return
	}
	r.names[id.Value] = true
	replace(node, &ast.CallNode{
		Callee:    &ast.IdentifierNode{Value: fnVar},
		Arguments: []ast.Node{&ast.StringNode{Value: id.Value}},
	})
}

// addRewriter is the third patch: it bounds concatenation. Every + that can
// meet two strings at run time (each operand is a string or of a type
// unknown until then) becomes a call of a function that refuses a result
// longer than MaxValueLen and otherwise adds as expr's own + does
// (runtime.Add). A + with an operand the checker knows to be a number, a
// boolean, nil, an array or a map is left alone: it cannot concatenate
// (expr's + does not join arrays), it keeps its own instruction, and the
// checker reports its type errors as before. The patch runs after the other
// two, so the checker has typed the rewritten tree (an OUTCOME variable is
// of unknown type). The functions have the types expr gives the + itself:
// (string, string) string for two known strings, (any, any) any otherwise,
// so the checker's verdicts on the expression around the + are unchanged.
type addRewriter struct{}

// Visit rewrites a + that may concatenate.
func (addRewriter) Visit(node *ast.Node) {
	n, ok := (*node).(*ast.BinaryNode)
	if !ok || n.Operator != "+" || !maybeString(n.Left) || !maybeString(n.Right) {
		return
	}
	if _, ok := n.Left.(*ast.StringNode); ok {
		if _, ok := n.Right.(*ast.StringNode); ok {
			return // two literals: expr folds them at compile time
		}
	}
	fn := fnAdd
	if isString(n.Left) && isString(n.Right) {
		fn = fnConcat
	}
	replace(node, &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: []ast.Node{n.Left, n.Right}})
}

// isString reports whether the checker typed n as a string, or n is a call
// of fnConcat made by this patch (not typed yet: giving the call a type
// would make the checker skip its callee and arguments).
func isString(n ast.Node) bool {
	if c, ok := n.(*ast.CallNode); ok {
		if id, ok := c.Callee.(*ast.IdentifierNode); ok && id.Value == fnConcat {
			return true
		}
	}
	t := n.Nature().Type
	return t != nil && t.Kind() == reflect.String
}

// maybeString reports whether n may be a string at run time: the checker
// typed it as a string, as an empty interface, or could not type it (nil
// is typed apart and is not a string).
func maybeString(n ast.Node) bool {
	nt := n.Nature()
	if nt.Type == nil {
		return !nt.Nil
	}
	switch nt.Type.Kind() {
	case reflect.String:
		return true
	case reflect.Interface:
		return nt.Type.NumMethod() == 0
	}
	return false
}

// boundedAdd is the + of operands that may be strings: expr's own addition
// (runtime.Add, whose panics the VM turns into errors as for +), except
// that two strings whose concatenation would be longer than MaxValueLen
// panic with a TooLarge *EvalError.
func boundedAdd(a, b any) any {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return boundedConcat(x, y)
		}
	}
	return runtime.Add(a, b)
}

// boundedConcat is the + of two operands known to be strings.
func boundedConcat(x, y string) string {
	if n := len(x) + len(y); n > MaxValueLen {
		panic(&EvalError{Kind: TooLarge, Message: fmt.Sprintf(
			"a concatenation in the assertion would make a string of %d bytes, longer than the limit of %d bytes (%d KiB) on concatenated strings",
			n, MaxValueLen, MaxValueLen>>10)})
	}
	return x + y
}

// replace swaps *node for n, keeping the source location for messages.
func replace(node *ast.Node, n ast.Node) {
	loc := (*node).Location()
	n.SetLocation(loc)
	if c, ok := n.(*ast.CallNode); ok {
		c.Callee.SetLocation(loc)
		for _, a := range c.Arguments {
			if s, ok := a.(*ast.StringNode); ok && s.Location() == (file.Location{}) {
				s.SetLocation(loc)
			}
		}
	}
	*node = n
}

func describeNode(n ast.Node) string {
	switch n.(type) {
	case *ast.ConditionalNode:
		return "a conditional (?: or if/else)"
	case *ast.BuiltinNode, *ast.PredicateNode, *ast.PointerNode:
		return "a built-in function or predicate"
	case *ast.VariableDeclaratorNode, *ast.SequenceNode:
		return "let and ; sequences"
	case *ast.ChainNode:
		return "optional chaining (?.)"
	case *ast.MapNode, *ast.PairNode:
		return "a map literal"
	case *ast.SliceNode:
		return "slicing"
	}
	return fmt.Sprintf("the construct %q", n.String())
}

func sortedKeys(m map[string]bool) []string {
	if len(m) == 0 {
		return nil
	}
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
