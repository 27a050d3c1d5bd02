package assertion

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzEvalEnv complements FuzzCompileEval (a fixed environment) with a
// fuzzed one: an assertion is compiled and evaluated against variables and
// observations decoded from JSON, as OUTCOME events carry them. Compile and
// Eval never panic; Eval is deterministic; EvalTrace agrees with Eval; a
// compiled program keeps its source. Seed corpus: testdata/fuzz/FuzzEvalEnv.
func FuzzEvalEnv(f *testing.F) {
	t0 := time.Date(2026, 6, 24, 10, 0, 0, 0, time.UTC)
	traj := Trajectory{StepCount: 3, EscalationCount: 1, ErrorCount: 2, ToolCounts: map[string]int{"iam_create_user": 2}, First: t0, Last: t0.Add(time.Minute)}
	f.Fuzz(func(t *testing.T, src string, envJSON []byte) {
		p, err := Compile(src)
		if err != nil {
			if _, ok := err.(*CompileError); !ok {
				t.Fatalf("Compile error %T: %v", err, err)
			}
			return
		}
		if p.Source() != src {
			t.Fatalf("Source() = %q, want %q", p.Source(), src)
		}
		var in struct {
			Variables    map[string]any `json:"variables"`
			Observations []Observation  `json:"observations"`
		}
		_ = json.Unmarshal(envJSON, &in)
		env := NewEnv(traj, in.Variables, in.Observations, fakeWatcher{states: map[string]string{"exp-1": "satisfied"}, lapses: map[string]int{"overdue": 2}})
		got, err := p.Eval(env)
		again, err2 := p.Eval(env)
		if got != again || (err == nil) != (err2 == nil) {
			t.Fatalf("%q: Eval not deterministic: %v %v / %v %v", src, got, err, again, err2)
		}
		traced, _, err3 := p.EvalTrace(env)
		if traced != got || (err == nil) != (err3 == nil) {
			t.Fatalf("%q: EvalTrace %v %v, Eval %v %v", src, traced, err3, got, err)
		}
		if err != nil {
			if _, ok := err.(*EvalError); !ok {
				t.Fatalf("%q: Eval error %T: %v", src, err, err)
			}
		}
	})
}
