package assertion

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeWatcher struct {
	states map[string]string
	lapses map[string]int
}

func (w fakeWatcher) ExpectationState(id string) (string, bool) {
	s, ok := w.states[id]
	return s, ok
}

func (w fakeWatcher) LapseCount(kind string) int {
	if kind == "" {
		n := 0
		for _, c := range w.lapses {
			n += c
		}
		return n
	}
	return w.lapses[kind]
}

func seedEnv(steps int, removed bool) *Env {
	t0 := time.Date(2026, 6, 24, 10, 0, 0, 0, time.UTC)
	tools := map[string]int{"iam_create_user": 1, "iam_add_user_to_group": 1}
	if removed {
		tools["iam_remove_user"] = 1
	}
	return NewEnv(
		Trajectory{StepCount: steps, ErrorCount: 1, ToolCounts: tools, First: t0, Last: t0.Add(90 * time.Second)},
		map[string]any{"target_username": "alice", "n": 3.0, "result": map[string]any{"status": "ok", "items": []any{1.0, "x"}}, "nothing": nil},
		[]Observation{
			{Call: "user_exists", Args: []any{"alice"}, Value: true},
			{Call: "group_member", Args: []any{"alice", "engineering"}, Value: true},
			{Call: "policy_count", Args: []any{"alice"}, Value: 2.0},
			{Call: "group_policy_count", Args: []any{"engineering"}, Value: 2},
			{Call: "quota", Args: []any{3}, Value: 10},
			{Call: "tagged", Args: []any{[]any{"a", 1}}, Value: true},
			{Call: "flaky", Args: []any{}, Value: false},
			{Call: "flaky", Args: []any{}, Value: true}, // later wins
			{Call: "count", Args: nil, Value: "three"},
		},
		fakeWatcher{states: map[string]string{"exp-1": "satisfied"}, lapses: map[string]int{"overdue": 2, "stalled": 1}},
	)
}

var seedAssertions = []string{
	"step_count <= 3",
	"escalation_count == 0",
	"tool_invoked('iam_remove_user') == false",
	"user_exists(target_username) AND group_member(target_username, 'engineering')",
	"policy_count(target_username) <= group_policy_count('engineering')",
}

func TestEval(t *testing.T) {
	env := seedEnv(3, false)
	tests := []struct {
		src  string
		want bool
	}{
		{"step_count <= 3", true},
		{"step_count < 3", false},
		{"escalation_count == 0", true},
		{"error_count == 1", true},
		{"duration_seconds == 90", true},
		{"duration_seconds > 89.5 and duration_seconds < 90.5", true},
		{"tool_invoked('iam_remove_user') == false", true},
		{`tool_invoked("iam_create_user")`, true},
		{"tool_count('iam_create_user') == 1 && tool_count('nope') == 0", true},
		{"user_exists(target_username) AND group_member(target_username, 'engineering')", true},
		{"user_exists(target_username) and group_member(target_username, \"engineering\")", true},
		{"policy_count(target_username) <= group_policy_count('engineering')", true},
		{"NOT user_exists(target_username)", false},
		{"Not (step_count > 3) Or FALSE", true},
		{"!(step_count > 3) || false", true},
		{"quota(3.0) == 10", true}, // 3 and 3.0 are the same JSON argument
		{"quota(3) == 10.0", true},
		{"tagged(['a', 1])", true},
		{"flaky()", true},
		{"count() == 'three'", true}, // expr predicate names are ordinary calls
		{"n == 3", true},
		{"n + 1 == 4", true},
		{"result.status == 'ok'", true},
		{"result.items[0] == 1", true},
		{"result.status in ['ok', 'done']", true},
		{"target_username startsWith 'al'", true},
		{"'AND' == 'AND' and \"or\" == 'or'", true}, // keywords inside strings untouched
		{"nothing == nil", true},
		{"TRUE", true},
		{"expectation_state('exp-1') == 'satisfied'", true},
		{"lapse_count() == 3 and lapse_count('overdue') == 2", true},
		{"step_count <= 3 // a comment with an apostrophe's AND\n", true},
		{"/* NOT */ step_count == 3", true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			p, err := Compile(tt.src)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			got, err := p.Eval(env)
			if err != nil {
				t.Fatalf("Eval: %v", err)
			}
			if got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSeedAssertions(t *testing.T) {
	for _, tt := range []struct {
		steps   int
		removed bool
		want    []bool
	}{
		{3, false, []bool{true, true, true, true, true}},
		{4, false, []bool{false, true, true, true, true}},
		{3, true, []bool{true, true, false, true, true}},
	} {
		env := seedEnv(tt.steps, tt.removed)
		for i, src := range seedAssertions {
			got, err := MustCompileForTest(t, src).Eval(env)
			if err != nil || got != tt.want[i] {
				t.Errorf("steps=%d removed=%v %q = %v, %v; want %v", tt.steps, tt.removed, src, got, err, tt.want[i])
			}
		}
	}
}

func MustCompileForTest(t testing.TB, src string) *Program {
	t.Helper()
	p, err := Compile(src)
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	return p
}

func TestEvalErrors(t *testing.T) {
	env := seedEnv(3, false)
	tests := []struct {
		src      string
		env      *Env
		kind     EvalErrorKind
		contains string
	}{
		{"missing_var == 1", env, MissingVariable, `"missing_var"`},
		{"user_exists('bob')", env, MissingObservation, `user_exists("bob")`},
		{"group_member(target_username, 'sales')", env, MissingObservation, `group_member("alice", "sales")`},
		{"unknown_fn()", env, MissingObservation, "unknown_fn()"},
		{"policy_count(target_username)  == 2 and quota(4) == 1", env, MissingObservation, "quota(4)"},
		{"n", env, NotBoolean, "a number"},
		{"count()", env, NotBoolean, "a string"},
		{"expectation_state('exp-2') == 'open'", env, MissingExpectation, `"exp-2"`},
		{"lapse_count() == 0", NewEnv(Trajectory{}, nil, nil, nil), NoWatcher, "watcher"},
		{"expectation_state('x') == 'open'", nil, NoWatcher, "watcher"},
		{"tool_invoked(n)", env, TypeMismatch, "string tool name"},
		{"target_username < 3", env, TypeMismatch, "evaluate"},
		{"quota(3) and true", env, NotBoolean, "a number"},
		{"nothing", env, NotBoolean, "nil"},
		{"step_count <= 3 and target_username == 'alice'", nil, MissingVariable, "target_username"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			p := MustCompileForTest(t, tt.src)
			got, err := p.Eval(tt.env)
			var ee *EvalError
			if !errors.As(err, &ee) {
				t.Fatalf("Eval = %v, %v; want *EvalError", got, err)
			}
			if ee.Kind != tt.kind || !strings.Contains(ee.Message, tt.contains) {
				t.Fatalf("error = %s %q; want %s containing %q", ee.Kind, ee.Message, tt.kind, tt.contains)
			}
			if strings.Contains(ee.Message, "\n") {
				t.Fatalf("message spans lines: %q", ee.Message)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	tests := []struct {
		src      string
		contains string
	}{
		{"", "empty"},
		{"   ", "empty"},
		{strings.Repeat("a", MaxSourceLen+1), "longer than 4096"},
		{"step_count", "boolean"},
		{"'x'", "boolean"},
		{"step_count <=", "unexpected"},
		{"user_exists('alice'", "unexpected"},
		{"step_count() == 1", "is a value, not a function"},
		{"tool_invoked == true", "is a function"},
		{"tool_invoked('a', 'b')", "takes 1 argument"},
		{"tool_count()", "takes 1 argument"},
		{"lapse_count('a', 'b') == 1", "takes 0 or 1 arguments"},
		{"__var('x')", "reserved"},
		{"$env == nil", "reserved"},
		{"len(x) > 1 and all(x, {# > 1})", "map key"},
		{"any(x, .y > 1)", "unexpected"},
		{"step_count > 1 ? true : false", "conditional"},
		{"let x = 1; x == 1", "let"},
		{"1..3 == [1,2,3]", ".."},
		{"a ?? true", "??"},
		{"a?.b == 1", "optional"},
		{"a.f(1) == 1", "methods"},
		{"(a.f)(1) == 1", "unexpected"},
		{"x matches 'a.*'", "matches"},
		{"{'a': 1} == x", "map literal"},
		{"x[1:2] == x", "slicing"},
		{strings.TrimSuffix(strings.Repeat("step_count == 1 or ", 200), " or "), "node"},
		{"step_count == 1\n  and __obs('x')", "line 2"},
		{"\xff == 1", "UTF-8"},
	}
	for _, tt := range tests {
		name := tt.src
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			p, err := Compile(tt.src)
			var ce *CompileError
			if !errors.As(err, &ce) {
				t.Fatalf("Compile = %v, %v; want *CompileError", p, err)
			}
			if !strings.Contains(ce.Error(), tt.contains) {
				t.Fatalf("error %q does not contain %q", ce.Error(), tt.contains)
			}
			if strings.Contains(ce.Error(), "\n") {
				t.Fatalf("message spans lines: %q", ce.Error())
			}
		})
	}
}

func TestNormalizeKeywords(t *testing.T) {
	tests := map[string]string{
		"a AND b OR NOT c":          "a and b or not c",
		"a And b oR nOt c":          "a and b or not c",
		"x == TRUE || y == False":   "x == true || y == false",
		"'AND' == \"OR\" AND `NOT`": "'AND' == \"OR\" and `NOT`",
		"'it\\'s AND' AND b":        "'it\\'s AND' and b",
		"ANDROID == ORACLE":         "ANDROID == ORACLE",
		"x.AND == 1":                "x.AND == 1",
		"a // AND\nOR b":            "a // AND\nor b",
		"'unterminated AND":         "'unterminated AND",
		"falſe":                     "falſe",
		"/* OR */ NOT x /* unterm":  "/* OR */ not x /* unterm",
		"my_and AND and_x":          "my_and and and_x",
		"Not(step_count > 3)":       "not(step_count > 3)",
		"user_exists(u) AND grp(u)": "user_exists(u) and grp(u)",
		"\"say \\\"AND\\\"\" AND x": "\"say \\\"AND\\\"\" and x",
		"TRUE":                      "true",
		"trueish":                   "trueish",
		"a\tAND\tb":                 "a\tand\tb",
		"":                          "",
		"AND":                       "and",
		"x==1AND y==2":              "x==1and y==2", // expr lexes 1 and AND apart too
		"n > 1 and NOT_A_KEYWORD":   "n > 1 and NOT_A_KEYWORD",
		"step_count<=3 AND(a OR b)": "step_count<=3 and(a or b)",
		"'a' AND 'b'":               "'a' and 'b'",
		"\"\" AND ''":               "\"\" and ''",
		"'\\\\' AND x":              "'\\\\' and x",
	}
	for in, want := range tests {
		if got := normalizeKeywords(in); got != want {
			t.Errorf("normalizeKeywords(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProgramInfo(t *testing.T) {
	p := MustCompileForTest(t, "user_exists(target_username) AND step_count <= max_steps AND lapse_count() == 0")
	if got := strings.Join(p.Names(), ","); got != "max_steps,step_count,target_username" {
		t.Errorf("Names = %s", got)
	}
	if got := strings.Join(p.Calls(), ","); got != "user_exists" {
		t.Errorf("Calls = %s", got)
	}
	if !p.UsesWatcher() || p.Source() == "" {
		t.Errorf("UsesWatcher/Source wrong")
	}
	var nilp *Program
	if _, err := nilp.Eval(nil); err == nil {
		t.Errorf("nil program evaluated")
	}
}

func TestEnvAccessors(t *testing.T) {
	env := seedEnv(4, false)
	if v, ok := env.Value("step_count"); !ok || v != 4 {
		t.Errorf("step_count = %v %v", v, ok)
	}
	if v, ok := env.Value("target_username"); !ok || v != "alice" {
		t.Errorf("target_username = %v %v", v, ok)
	}
	if _, ok := env.Value("nope"); ok {
		t.Errorf("nope found")
	}
	if v, ok := env.Observe("group_policy_count", "engineering"); !ok || v != 2.0 {
		t.Errorf("observation = %v %v (want float64 2)", v, ok)
	}
	var nilEnv *Env
	if _, ok := nilEnv.Value("step_count"); !ok {
		t.Errorf("nil env has no step_count")
	}
	if len(nilEnv.Variables()) != 0 || nilEnv.Trajectory().StepCount != 0 {
		t.Errorf("nil env not empty")
	}
}

func TestConcurrentEval(t *testing.T) {
	progs := make([]*Program, len(seedAssertions))
	for i, s := range seedAssertions {
		progs[i] = MustCompileForTest(t, s)
	}
	envs := []*Env{seedEnv(3, false), seedEnv(4, true)}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			env := envs[g%2]
			for i := 0; i < 2000; i++ {
				p := progs[i%len(progs)]
				got, err := p.Eval(env)
				want := !(g%2 == 1 && (i%len(progs) == 0 || i%len(progs) == 2))
				if err != nil || got != want {
					t.Errorf("goroutine %d: %q = %v, %v", g, p.Source(), got, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func FuzzCompileEval(f *testing.F) {
	for _, s := range seedAssertions {
		f.Add(s)
	}
	f.Add("NOT a OR b AND 'x' == \"y\"")
	f.Add("lapse_count('overdue') > expectation_state('e')")
	env := seedEnv(3, false)
	f.Fuzz(func(t *testing.T, src string) {
		p, err := Compile(src)
		if err != nil {
			return
		}
		_, _ = p.Eval(env)
		_, _ = p.Eval(nil)
	})
}

func TestEvalTrace(t *testing.T) {
	env := seedEnv(4, false)
	tests := []struct {
		src   string
		want  bool
		trace string
	}{
		{"step_count <= 3", false, "step_count=4"},
		{"user_exists(target_username) AND group_member(target_username, 'engineering')", true,
			`target_username="alice"; user_exists("alice")=true; group_member("alice", "engineering")=true`},
		{"tool_invoked('iam_remove_user') == false", true, `tool_invoked("iam_remove_user")=false`},
		{"flaky() and quota(3) == 10 and lapse_count() == 3", true, `flaky()=true; quota(3)=10; lapse_count()=3`},
	}
	for _, tt := range tests {
		got, trace, err := MustCompileForTest(t, tt.src).EvalTrace(env)
		if err != nil || got != tt.want || strings.Join(trace, "; ") != tt.trace {
			t.Errorf("%q = %v %q %v; want %v %q", tt.src, got, strings.Join(trace, "; "), err, tt.want, tt.trace)
		}
	}
	_, trace, err := MustCompileForTest(t, "user_exists(target_username) and user_exists('bob')").EvalTrace(env)
	var ee *EvalError
	if !errors.As(err, &ee) || ee.Kind != MissingObservation || len(trace) != 2 {
		t.Errorf("trace on error: %v %v", trace, err)
	}
}

// TestCompileKeepsEachSource: a source compiled again is the same
// Program (compiled once), from any goroutine; one that does not compile
// is refused every time.
func TestCompileKeepsEachSource(t *testing.T) {
	src := "step_count <= 3 AND tool_invoked('x') == false"
	first, err := Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if p, err := Compile(src); err != nil || p != first {
				t.Errorf("compiled again: %p %v, want %p", p, err, first)
			}
		}()
	}
	wg.Wait()
	for range 2 {
		if _, err := Compile("step_count <="); err == nil {
			t.Fatal("an assertion that does not compile was accepted")
		}
	}
}
