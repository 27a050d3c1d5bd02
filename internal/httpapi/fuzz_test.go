package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
)

// Fuzz targets of the JSON request bodies, sent through the whole handler
// to the embedded runtime in-process: whatever the body, the answer is
// never a 5xx (a panic in a handler is answered 500, so this also catches
// panics), a 4xx is an application/problem+json body with its status, and
// a 2xx is JSON. Seed corpora are under testdata/fuzz/<FuzzName>/.

// fuzzHandler starts the runtime for one fuzz target, seeded as for the
// authorization matrix (once per fuzzing worker process).
func fuzzHandler(f *testing.F) (http.Handler, fixture) {
	ap := startApp(f)
	return ap.Handler, seed(f, ap.Handler)
}

func checkAnswer(t *testing.T, method, path string, body []byte, a answer) {
	t.Helper()
	if a.status >= 500 {
		t.Fatalf("%s %s answered %d: %s\nbody: %q", method, path, a.status, a.body, truncate(body, 2000))
	}
	ct := a.header.Get("Content-Type")
	switch {
	case a.status >= 400:
		var p struct {
			Status int `json:"status"`
			Errors []struct {
				Path    *string `json:"path"`
				Message string  `json:"message"`
			} `json:"errors"`
		}
		if ct != "application/problem+json" || json.Unmarshal(a.body, &p) != nil || p.Status != a.status {
			t.Fatalf("%s %s: %d with %q: %s", method, path, a.status, ct, a.body)
		}
		for _, e := range p.Errors {
			if e.Path == nil || e.Message == "" {
				t.Fatalf("%s %s: field error without path or message: %s", method, path, a.body)
			}
		}
	case a.status >= 200 && a.status < 300:
		if ct != "application/json" || !json.Valid(a.body) {
			t.Fatalf("%s %s: %d with %q: %s", method, path, a.status, ct, a.body)
		}
	default:
		t.Fatalf("%s %s: status %d", method, path, a.status)
	}
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// fuzzBody is the shared body of the fuzz targets: body sent to method
// path with every scope.
func fuzzBody(f *testing.F, method, path string) {
	h, _ := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswer(t, method, path, body, do(h, method, path, allToken, body))
	})
}

// FuzzRaiseBody: POST /v1/agents/agent-1/expectations.
func FuzzRaiseBody(f *testing.F) { fuzzBody(f, "POST", "/v1/agents/agent-1/expectations") }

// FuzzFactsBody: POST /v1/agents/agent-1/facts.
func FuzzFactsBody(f *testing.F) { fuzzBody(f, "POST", "/v1/agents/agent-1/facts") }

// FuzzWithdrawBody: POST /v1/agents/agent-1/withdrawals.
func FuzzWithdrawBody(f *testing.F) { fuzzBody(f, "POST", "/v1/agents/agent-1/withdrawals") }

// FuzzA2ABody: POST /v1/agents/agent-1/a2a.
func FuzzA2ABody(f *testing.F) { fuzzBody(f, "POST", "/v1/agents/agent-1/a2a") }

// FuzzCardBody: PUT /v1/agents/{agentId} (a fresh agent, so agent-1's card
// stays as seeded for the other targets).
func FuzzCardBody(f *testing.F) { fuzzBody(f, "PUT", "/v1/agents/agent-fuzz") }

// FuzzEventBody: POST /v1/executions/plan-2/events (plan-2 has an unsealed
// anticipation, so a valid event begins its execution).
func FuzzEventBody(f *testing.F) { fuzzBody(f, "POST", "/v1/executions/plan-2/events") }

// FuzzGradeBody: POST /v1/verifications/{id}/grades on plan-1's VERIFY.
func FuzzGradeBody(f *testing.F) {
	h, fix := fuzzHandler(f)
	path := "/v1/verifications/" + fix.verificationID + "/grades"
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswer(t, "POST", path, body, do(h, "POST", path, allToken, body))
	})
}

// FuzzAnticipationBody: POST /v1/anticipations and PUT
// /v1/anticipations/{anticipation_id}. A body that is a JSON object is
// sent twice: as fuzzed, and re-signed (d_dna_signature recomputed), so
// that the fuzzer reaches past the signature check into validation,
// storage and sealing.
func FuzzAnticipationBody(f *testing.F) {
	h, _ := fuzzHandler(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		checkAnswer(t, "POST", "/v1/anticipations", body, do(h, "POST", "/v1/anticipations", allToken, body))
		signed, err := anticipate.Sign(body)
		if err != nil {
			return
		}
		checkAnswer(t, "POST", "/v1/anticipations", signed, do(h, "POST", "/v1/anticipations", allToken, signed))
		var m struct {
			ID string `json:"anticipation_id"`
		}
		if json.Unmarshal(signed, &m) == nil && m.ID != "" {
			path := "/v1/anticipations/" + url.PathEscape(m.ID)
			checkAnswer(t, "PUT", path, signed, do(h, "PUT", path, allToken, signed))
		}
	})
}
