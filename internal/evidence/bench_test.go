package evidence_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/agentclock/clockwork/internal/evidence"
)

// BenchmarkCheck10k measures the offline verifier on a signed bundle of
// 10,000 events (the seed's ANTICIPATE): go test -run '^$' -bench
// Check10k -benchtime 5x ./internal/evidence. Besides wall time it reports
// the process's CPU time per check (cpu-ms/op), which a busy machine does
// not inflate.
func BenchmarkCheck10k(b *testing.B) {
	_, key, _ := ed25519.GenerateKey(nil)
	bundle := build(b, 10000, key)
	b.SetBytes(int64(len(bundle)))
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if rep := evidence.Check(bundle, evidence.Options{}); !rep.OK() || rep.Events != 10000 {
			b.Fatalf("%+v", rep.FirstBroken())
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(len(bundle)), "bundle-bytes")
}
