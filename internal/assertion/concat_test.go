package assertion

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// concatEnv holds strings around MaxValueLen and numbers of both Go kinds.
func concatEnv() *Env {
	return NewEnv(Trajectory{StepCount: 3},
		map[string]any{
			"s": "ab", "t": "cd", "n": 3.0, "m": 0.5, "i": 2, "j": -5,
			"half": strings.Repeat("h", MaxValueLen/2),
			"full": strings.Repeat("h", MaxValueLen),
			"big":  strings.Repeat("b", 2*MaxValueLen),
			"h256": strings.Repeat("h", 256),
			"arr":  []any{1.0}, "obj": map[string]any{"a": 1.0}, "null": nil,
		},
		[]Observation{{Call: "name", Args: nil, Value: "x"}}, nil)
}

func TestConcatWithinLimit(t *testing.T) {
	env := concatEnv()
	for _, src := range []string{
		"s + t == 'abcd'",
		"s + 'x' == 'abx' and 'x' + s == 'xab'",
		"'a' + 'b' == 'ab'",
		"'a' + 'b' + s + 'c' == 'abab' + 'c'",
		"name() + s == 'xab'",
		"(s + t) startsWith 'ab' and s + t in ['abcd']",
		"half + half == full",                                // exactly MaxValueLen
		"full + '' == full",                                  // a variable of MaxValueLen bytes plus nothing
		"'' + full + '' == full",                             // idem, twice
		"h256" + strings.Repeat(" + h256", 127) + " == half", // 128 concatenations of 256 bytes
		"(s + t) == 1 == false",                              // unknown types still compare at run time
	} {
		t.Run(src[:min(len(src), 60)], func(t *testing.T) {
			got, err := MustCompileForTest(t, src).Eval(env)
			if err != nil || !got {
				t.Fatalf("Eval = %v, %v; want true", got, err)
			}
		})
	}
}

func TestConcatOverLimit(t *testing.T) {
	env := concatEnv()
	limit := fmt.Sprint(MaxValueLen)
	for _, tt := range []struct{ src, size string }{
		{"full + 'x' == ''", fmt.Sprint(MaxValueLen + 1)},
		{"'x' + full == ''", fmt.Sprint(MaxValueLen + 1)},
		{"half + half + s == ''", fmt.Sprint(MaxValueLen + 2)},
		{"s + half + half == ''", fmt.Sprint(MaxValueLen + 2)},
		{"big + '' == big", fmt.Sprint(2 * MaxValueLen)}, // the variable alone is too long to be a result
		{"'a' + 'b' + big == ''", fmt.Sprint(2*MaxValueLen + 2)},
		{"(big + big) startsWith 'b'", fmt.Sprint(4 * MaxValueLen)},
		{"s == 'ab' and (t + half + half + t) == ''", fmt.Sprint(MaxValueLen + 2)},
		// The costly assertion of the HTTP limits test: it stops at the
		// first concatenation.
		{"!(big" + strings.Repeat(" + big", 254) + " == '')", fmt.Sprint(4 * MaxValueLen)},
	} {
		t.Run(tt.src[:min(len(tt.src), 60)], func(t *testing.T) {
			p := MustCompileForTest(t, tt.src)
			for _, eval := range []func(*Env) (bool, error){
				p.Eval,
				func(e *Env) (bool, error) { ok, _, err := p.EvalTrace(e); return ok, err },
			} {
				got, err := eval(env)
				var ee *EvalError
				if !errors.As(err, &ee) {
					t.Fatalf("Eval = %v, %v; want *EvalError", got, err)
				}
				if ee.Kind != TooLarge || !strings.Contains(ee.Message, "limit of "+limit+" bytes") ||
					!strings.Contains(ee.Message, " "+tt.size+" bytes") || strings.Contains(ee.Message, "\n") {
					t.Fatalf("error = %s %q; want %s naming %s and the limit %s", ee.Kind, ee.Message, TooLarge, tt.size, limit)
				}
			}
		})
	}
}

// TestPlusUnchanged checks that + keeps expr's semantics, results and
// errors, whether or not it is rewritten into a bounded concatenation.
func TestPlusUnchanged(t *testing.T) {
	env := concatEnv()
	for _, src := range []string{
		"step_count + 1 == 4",
		"step_count + 1.5 == 4.5",
		"1 + 2 == 3",
		"1 + 2.5 == 3.5",
		"-1 + -2 == -3",
		"+1 + -2.5 == -1.5",
		"n + 1 == 4",
		"n + m == 3.5",
		"i + j == -3",
		"i + n == 5",
		"i + 0.5 == 2.5",
		"j + -1 == -6",
		"step_count + i + n == 8",
		"duration_seconds + 1 == 1",
	} {
		t.Run(src, func(t *testing.T) {
			got, err := MustCompileForTest(t, src).Eval(env)
			if err != nil || !got {
				t.Fatalf("Eval = %v, %v; want true", got, err)
			}
		})
	}
	// Compile-time type errors, as expr reports them.
	for _, tt := range []struct{ src, msg string }{
		{"1 + true", "invalid operation: + (mismatched types int and bool) (line 1, column 3)"},
		{"'a' + 1 == 'a1'", "invalid operation: + (mismatched types string and int) (line 1, column 5)"},
		{"'a' + true", "invalid operation: + (mismatched types string and bool)"},
		{"(1 + true) + s == 'x'", "invalid operation: + (mismatched types int and bool) (line 1, column 4)"},
		{"s + (1 + true) == 'x'", "invalid operation: + (mismatched types int and bool) (line 1, column 8)"},
		{"nil + 'a' == 'a'", "invalid operation: + (mismatched types unknown and string)"},
		{"[1] + [2] == [1, 2]", "invalid operation: + (mismatched types []interface {} and []interface {})"},
		{"('a' + 'b') > 1", "invalid operation: > (mismatched types string and int)"},
		{"('a' + 'b' + 'c') + 1 == 'x'", "invalid operation: + (mismatched types string and int)"},
		{"('a' + 'b' + 'c') == 1", "invalid operation: == (mismatched types string and int)"},
		{"'a' + 'b' + 'c'", "result is a string"},
		{"__add(s, t) == 'abcd'", "reserved"},
		{"__concat('a', 'b') == 'ab'", "reserved"},
	} {
		t.Run(tt.src, func(t *testing.T) {
			_, err := Compile(tt.src)
			var ce *CompileError
			if !errors.As(err, &ce) || !strings.Contains(ce.Error(), tt.msg) {
				t.Fatalf("Compile error = %v; want one containing %q", err, tt.msg)
			}
		})
	}
	// Run-time type errors, as expr reports them. expr's + does not join
	// arrays, so only strings can grow.
	for _, tt := range []struct{ src, msg string }{
		{"s + n == 1", "invalid operation: string + float64 (line 1, column 3)"},
		{"n + s == 1", "invalid operation: float64 + string (line 1, column 3)"},
		{"step_count + s == 1", "invalid operation: int + string (line 1, column 12)"},
		{"s + step_count == 1", "invalid operation: string + int (line 1, column 3)"},
		{"arr + arr == arr", "invalid operation: []interface {} + []interface {} (line 1, column 5)"},
		{"s + obj == ''", "invalid operation: string + map[string]interface {} (line 1, column 3)"},
		{"null + s == ''", "invalid operation: <nil> + string (line 1, column 6)"},
		{"(s + t) > 1", "invalid operation: string > int"},
	} {
		t.Run(tt.src, func(t *testing.T) {
			_, err := MustCompileForTest(t, tt.src).Eval(env)
			var ee *EvalError
			if !errors.As(err, &ee) || ee.Kind != TypeMismatch || !strings.Contains(ee.Message, tt.msg) {
				t.Fatalf("Eval error = %v; want %s containing %q", err, TypeMismatch, tt.msg)
			}
		})
	}
}

// TestBoundedAdd checks the functions + is rewritten into: Go types of
// results are expr's (int + int stays int).
func TestBoundedAdd(t *testing.T) {
	for _, tt := range []struct{ a, b, want any }{
		{2, 3, 5},
		{2, -3, -1},
		{2, 0.5, 2.5},
		{0.5, 2, 2.5},
		{1.5, -0.5, 1.0},
		{int64(2), 3, 5},
		{"ab", "cd", "abcd"},
		{"", "", ""},
	} {
		if got := boundedAdd(tt.a, tt.b); got != tt.want {
			t.Errorf("boundedAdd(%#v, %#v) = %#v, want %#v", tt.a, tt.b, got, tt.want)
		}
	}
	if got := boundedConcat(strings.Repeat("x", MaxValueLen-1), "y"); len(got) != MaxValueLen {
		t.Errorf("boundedConcat at the limit: len %d", len(got))
	}
	for name, f := range map[string]func(){
		"boundedAdd":    func() { boundedAdd(strings.Repeat("x", MaxValueLen), "y") },
		"boundedConcat": func() { boundedConcat("y", strings.Repeat("x", MaxValueLen)) },
	} {
		func() {
			defer func() {
				ee, ok := recover().(*EvalError)
				if !ok || ee.Kind != TooLarge {
					t.Errorf("%s over the limit panicked with %v, want a %s *EvalError", name, ee, TooLarge)
				}
			}()
			f()
		}()
	}
}
