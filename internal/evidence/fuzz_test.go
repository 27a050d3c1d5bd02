package evidence_test

import (
	"crypto/ed25519"
	"testing"

	"github.com/agentclock/clockwork/internal/evidence"
)

// FuzzCheck: the verifier never panics, and whatever it accepts is a
// bundle whose every link it reported as holding.
func FuzzCheck(f *testing.F) {
	// Small seeds: every execution validates an ANTICIPATE and compiles
	// its assertions, so minimizing a large input would take the whole run.
	f.Add(build(f, 3, ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))))
	f.Add([]byte(`{"bundle":"clockwork-evidence/1","anticipation":{},"verification":{},"public_key":null,"events":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rep := evidence.Check(b, evidence.Options{})
		if rep.OK() && (rep.Events == 0 || len(rep.Findings) == 0) {
			t.Fatalf("accepted without checking: %+v", rep)
		}
	})
}
