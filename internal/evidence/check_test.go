package evidence_test

import (
	"crypto/ed25519"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evidence"
	"github.com/agentclock/clockwork/internal/evidence/evidencetest"
)

func build(t testing.TB, n int, key ed25519.PrivateKey) []byte {
	t.Helper()
	b, err := evidencetest.Build(n, key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCheckSignedBundle(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	b := build(t, 9, key)
	rep := evidence.Check(b, evidence.Options{})
	if !rep.OK() || rep.Events != 9 || rep.Regraded != 5 || rep.Verdict != "FAIL" && rep.Verdict != "PASS" {
		t.Fatalf("report: %+v", rep)
	}
	max := 1500
	if testing.Short() {
		max = 200
	}
	evidencetest.Suite(t, b, evidence.Check, max)
}

func TestCheckUnsignedBundle(t *testing.T) {
	b := build(t, 6, nil)
	rep := evidence.Check(b, evidence.Options{})
	if !rep.OK() {
		t.Fatalf("report: %+v", rep.FirstBroken())
	}
	if len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, " "), "not signed") {
		t.Fatalf("an unsigned bundle must be noted as such: %v", rep.Notes)
	}
	_, other, _ := ed25519.GenerateKey(nil)
	if rep := evidence.Check(b, evidence.Options{TrustedKey: other.Public().(ed25519.PublicKey)}); rep.OK() {
		t.Fatal("an unsigned bundle passes with a pinned key")
	}
	max := 1500
	if testing.Short() {
		max = 200
	}
	evidencetest.Suite(t, b, evidence.Check, max)
}

func TestCheckNeverPanics(t *testing.T) {
	for _, in := range []string{"", "null", "[]", "{}", `{"bundle":1}`, "\xff", `{"bundle":"clockwork-evidence/1","anticipation":{},"verification":{},"public_key":null,"events":[]}`,
		`{"bundle":"clockwork-evidence/1","anticipation":1,"verification":[],"public_key":7,"events":{}}`} {
		if rep := evidence.Check([]byte(in), evidence.Options{}); rep.OK() {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestCheckReadsValuesNotSpellings: numbers and strings spelled otherwise
// but equal in value are not tampering.
func TestCheckReadsValuesNotSpellings(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	b := string(build(t, 4, key))
	for _, r := range [][2]string{{`"seq":1,`, `"seq":1.0,`}, {`"seq":2,`, `"seq":2e0,`}, {`"bundle":"clockwork-evidence/1"`, `"bundle":"clockwork\u002devidence/1"`},
		{`"weight":1}`, `"weight":1.00}`}, {`"message_type":"VERIFY"`, `"message_type":"\u0056ERIFY"`}} {
		if !strings.Contains(b, r[0]) {
			t.Fatalf("%s not in the bundle", r[0])
		}
		alt := strings.Replace(b, r[0], r[1], 1)
		if rep := evidence.Check([]byte(alt), evidence.Options{}); !rep.OK() {
			t.Errorf("%s spelled %s: %+v", r[0], r[1], *rep.FirstBroken())
		}
	}
}

// TestCheckLegacyEvents: events stored before events were RFC-032 messages
// name their type in event_type; their bundles still check, and such an
// event is not accepted where the chain says otherwise.
func TestCheckLegacyEvents(t *testing.T) {
	ant, err := anticipate.Sign([]byte(evidencetest.SeedAnticipation))
	if err != nil {
		t.Fatal(err)
	}
	events := evidencetest.SeedEvents(6)
	for _, e := range events {
		e["event_type"] = e["message_type"]
		delete(e, "message_type")
		delete(e, "protocol_version")
	}
	_, key, _ := ed25519.GenerateKey(nil)
	b, err := evidencetest.BuildFrom(ant, events, key)
	if err != nil {
		t.Fatal(err)
	}
	if rep := evidence.Check(b, evidence.Options{}); !rep.OK() || rep.Events != 6 {
		t.Fatalf("legacy bundle: %+v", rep.Findings)
	}
	evidencetest.Suite(t, b, evidence.Check, 100)
	if _, err := evidence.ParseEvent([]byte(`{"event_type":"STEP_COMPLETE","message_type":"STEP_COMPLETE","event_id":"e","timestamp":"2026-06-24T10:00:00Z"}`)); err == nil {
		t.Fatal("an event with both type members was accepted")
	}
}
