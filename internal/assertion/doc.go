// Package assertion is the expression language of DETERMINISTIC criteria in
// an ANTICIPATE message (AIGP RFC-032 section 3; semantics in design.md
// section 4). It is pure: no I/O, no clock, no globals that change.
//
// # Language
//
// An assertion is one boolean expression:
//
//	step_count <= 3
//	escalation_count == 0
//	tool_invoked('iam_remove_user') == false
//	user_exists(target_username) AND group_member(target_username, 'engineering')
//	policy_count(target_username) <= group_policy_count('engineering')
//
// Supported: the logical operators AND, OR, NOT in any letter case (and,
// And, ...) as well as &&, || and !; comparisons == != < <= > >=; arithmetic
// + - * / % ** ^; in, contains, startsWith, endsWith; numbers, strings in
// single, double or back quotes, true and false (in any letter case), nil,
// array literals, member access on values (result.status, items[0]),
// parentheses and comments. NOT and ! bind tighter than comparisons, so
// write NOT (a == b), not NOT a == b. Conditionals, closures, let, ranges
// (..), ?? and expr's built-in functions are rejected at compile time.
//
// Names are resolved in this order:
//
//   - The built-in values step_count (STEP_COMPLETE events), escalation_count
//     (ESCALATION events), error_count (TOOL_RESULT events whose status is
//     not SUCCESS) and duration_seconds (last minus first event timestamp).
//   - The built-in functions tool_invoked(name) and tool_count(name)
//     (TOOL_REQUEST events for that tool), and the watcher functions
//     expectation_state(id) and lapse_count() / lapse_count(kind).
//   - The trajectory: the value tool_sequence, the list of the tools of
//     the plan's TOOL_REQUEST events in order; trajectory_exact(list)
//     (the sequence is exactly list), trajectory_in_order(list) (list is a
//     subsequence: those tools occur in that order, others may come
//     between), trajectory_any_order(list) (each tool of list occurs, as
//     many times as list names it, in any order), tool_call_f1(list) (the
//     F1 score, 0 to 1, of the calls made against the expected multiset:
//     2PR/(P+R) with P the share of calls that were expected and R the
//     share of expected calls made; 1 when both are empty), and
//     tool_args(name) (the argument objects of that tool's requests, in
//     order; an empty object for a request without arguments), as in
//     tool_args('book_flight')[0].destination == 'LIS'. The first
//     MaxToolSequence calls are kept; past them these fail rather than
//     answer on part of the trajectory.
//   - Any other bare name is an OUTCOME variable.
//   - Any other call f(args...) is looked up, after its arguments are
//     evaluated, among the OUTCOME observations
//     {"call": "f", "args": [...], "value": ...}; arguments compare by their
//     JSON value, so 3 and 3.0 are the same argument.
//
// The words and, or, not, true and false are reserved in every letter case;
// names that begin with "__" or "$" are reserved too.
//
// A missing variable, a missing observation, a watcher function without a
// watcher, a type error at run time, a concatenation longer than the limit
// below or a result that is not a boolean makes Eval return an *EvalError
// whose message names what is missing or wrong; the grader marks the
// criterion ERROR and scores it 0.
//
// # Limits
//
// A source is at most MaxSourceLen bytes and MaxNodes syntax nodes, and the
// language has no loops, so evaluation takes at most one step per node. A
// + that would join two strings into more than MaxValueLen bytes (64 KiB)
// fails with a TooLarge *EvalError instead (expr's + does not join arrays,
// and no other operation builds a value larger than its operands). So no
// step builds more than MaxValueLen bytes or reads more than the OUTCOME
// data (a comparison, contains, in), and the cost of an evaluation is
// bounded by MaxNodes times that, instead of growing as the number of
// concatenations squared times the data. A variable may be longer than
// MaxValueLen; it just cannot be concatenated.
//
// # Implementation and why expr-lang
//
// Assertions compile with github.com/expr-lang/expr. Compile rewrites the
// keywords lexically (outside strings and comments; the rewrite keeps every
// byte offset, so error columns stay right), then, while expr type-checks,
// rewrites the syntax tree: an unknown call f(a, b) becomes __obs("f", a, b),
// an unknown name x becomes __var("x"), and the built-ins become calls of
// typed functions; last, a + whose operands may both be strings (known
// strings or values of unknown type, such as variables) becomes a call of a
// function that enforces MaxValueLen and otherwise adds exactly as expr's +
// (runtime.Add), while a + with a known number, boolean, nil or array
// operand keeps expr's own instruction and compile-time type errors. The
// program is compiled against a map environment, so at
// run time every built-in value and function is a single map load (expr's
// OpLoadFast) and the typed functions use expr's reflection-free call paths.
// Eval runs the shared, immutable program on a pooled virtual machine; an
// Env indexes the observations once. Compile once, evaluate many times from
// any number of goroutines.
//
// expr-lang was chosen over cel-go because (1) its AST patching lets us
// resolve unknown function names at run time against OUTCOME observations,
// which CEL's declaration-first type checker does not allow without
// declaring every function up front; (2) its syntax already has the
// single-quoted strings, and/or/not and !/&&/|| the seed uses, so only the
// letter case of keywords needs rewriting; (3) it is a single pure-Go module
// with no protobuf dependency, which keeps the Lambda bundle small; and (4)
// its VM evaluates these assertions in a few hundred nanoseconds with no
// allocation on the success path. CEL's strengths (cost estimation, a
// standard spec) matter less here because sources are bounded to 4 KiB and
// MaxNodes, the language has no loops, and concatenations are bounded to
// MaxValueLen.
package assertion
