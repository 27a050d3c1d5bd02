package assertion

import "testing"

// BenchmarkEvalSeed evaluates the seed's five assertions in turn against one
// Env and reports evaluations per second (one op = one evaluation).
func BenchmarkEvalSeed(b *testing.B) {
	progs := make([]*Program, len(seedAssertions))
	for i, s := range seedAssertions {
		progs[i] = MustCompileForTest(b, s)
	}
	env := seedEnv(3, false)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if ok, err := progs[i%len(progs)].Eval(env); !ok || err != nil {
			b.Fatalf("%q = %v, %v", progs[i%len(progs)].Source(), ok, err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
}

// BenchmarkEvalSeedEach reports each seed assertion separately.
func BenchmarkEvalSeedEach(b *testing.B) {
	env := seedEnv(3, false)
	for _, s := range seedAssertions {
		p := MustCompileForTest(b, s)
		b.Run(s, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if ok, err := p.Eval(env); !ok || err != nil {
					b.Fatalf("%v %v", ok, err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
		})
	}
}

// BenchmarkEvalSeedParallel runs the seed's assertions on every core.
func BenchmarkEvalSeedParallel(b *testing.B) {
	progs := make([]*Program, len(seedAssertions))
	for i, s := range seedAssertions {
		progs[i] = MustCompileForTest(b, s)
	}
	env := seedEnv(3, false)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if ok, err := progs[i%len(progs)].Eval(env); !ok || err != nil {
				b.Errorf("%v %v", ok, err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "evals/s")
}

// BenchmarkCompileSeed measures compiling one seed assertion.
func BenchmarkCompileSeed(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Compile(seedAssertions[i%len(seedAssertions)]); err != nil {
			b.Fatal(err)
		}
	}
}
