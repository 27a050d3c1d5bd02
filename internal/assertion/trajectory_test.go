package assertion

import (
	"strings"
	"testing"
)

// TestTrajectoryMatchers: the matchers over a plan's tool calls, and
// tool_args reading each call's argument object.
func TestTrajectoryMatchers(t *testing.T) {
	traj := Trajectory{
		ToolSequence: []string{"search", "book_flight", "search", "pay"},
		ToolArgs: map[string][]any{
			"search":      {map[string]any{"q": "LIS"}, map[string]any{"q": "OPO"}},
			"book_flight": {map[string]any{"destination": "LIS"}},
			"pay":         {map[string]any{}},
		},
	}
	env := NewEnv(traj, nil, nil, nil)
	cases := []struct {
		src  string
		want bool
	}{
		{"trajectory_exact(['search', 'book_flight', 'search', 'pay'])", true},
		{"trajectory_exact(['search', 'book_flight', 'pay'])", false},
		{"trajectory_in_order(['search', 'pay'])", true},
		{"trajectory_in_order(['pay', 'search'])", false},
		{"trajectory_in_order([])", true},
		{"trajectory_any_order(['pay', 'book_flight'])", true},
		{"trajectory_any_order(['search', 'search', 'search'])", false},
		{"tool_call_f1(['search', 'book_flight', 'search', 'pay']) == 1", true},
		// 3 of 4 calls expected (P 0.75), 3 of 3 expected made (R 1): F1 6/7.
		{"tool_call_f1(['search', 'book_flight', 'pay']) > 0.857 && tool_call_f1(['search', 'book_flight', 'pay']) < 0.858", true},
		{"tool_call_f1(['refund']) == 0", true},
		{"tool_args('book_flight')[0].destination == 'LIS'", true},
		{"tool_args('search')[1].q == 'OPO'", true},
		{"tool_args('refund') == []", true},
		{"tool_sequence[1] == 'book_flight' && tool_sequence[3] == 'pay'", true},
		{"'pay' in tool_sequence", true},
	}
	for _, c := range cases {
		p, err := Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, err := p.Eval(env)
		if err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.src, got, err, c.want)
		}
		_, trace, err := p.EvalTrace(env)
		if err != nil || len(trace) == 0 {
			t.Errorf("%s: trace %v, %v", c.src, trace, err)
		}
	}
	for _, src := range []string{"trajectory_exact('search')", "trajectory_in_order([1])", "tool_args(3) == []"} {
		p, err := Compile(src)
		if err != nil {
			continue // refused at compile time is fine too
		}
		if _, err := p.Eval(env); err == nil {
			t.Errorf("%s evaluated without error", src)
		}
	}
	long := NewEnv(Trajectory{SequenceTruncated: true}, nil, nil, nil)
	p, _ := Compile("trajectory_in_order(['a'])")
	if _, err := p.Eval(long); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a truncated sequence must fail the matcher: %v", err)
	}
	// tool_sequence does not answer on part of the calls either.
	q, _ := Compile("!('iam_remove_user' in tool_sequence)")
	if _, err := q.Eval(NewEnv(Trajectory{ToolSequence: []string{"noop"}, SequenceTruncated: true}, nil, nil, nil)); err == nil {
		t.Error("tool_sequence answered on a truncated sequence")
	}
	a, _ := Compile("tool_args('pay') == []")
	if _, err := a.Eval(NewEnv(Trajectory{ToolSequence: []string{"pay"}, ArgsTruncated: true}, nil, nil, nil)); err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Errorf("tool_args answered on truncated arguments: %v", err)
	}
	if _, err := Compile("trajectory_exact"); err == nil {
		t.Error("a matcher named without a call must not compile")
	}
}
