package anticipate

import "testing"

// BenchmarkValidateSeed measures validating (and compiling) the seed's
// ANTICIPATE.
func BenchmarkValidateSeed(b *testing.B) {
	raw := seedRaw(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Validate(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGradeSeed measures grading the seed's execution.
func BenchmarkGradeSeed(b *testing.B) {
	raw := seedRaw(b)
	a, _ := Validate(raw)
	env := envOf(b, seedEvents(b, 3, false, nil), nil)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		v := Grade(a, a.Programs(), env, nil, Execution{PlanID: "plan-abc123"}, t0)
		if v.Verdict != VerdictPass {
			b.Fatal(v.Verdict)
		}
	}
}
