package credentials

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// TestLimits sends each documented limit of a credentials body exactly at
// it (accepted) and one past it (refused, naming the field).
func TestLimits(t *testing.T) {
	ca := a2atest.NewTestCA(t)
	certPEM, keyPEM := ca.ClientCert(t, "clockwork")
	manyCard := expect.Card{AgentID: "a", SecuritySchemes: map[string]expect.SecurityScheme{}}
	for i := 0; i <= MaxSchemes; i++ {
		manyCard.SecuritySchemes[fmt.Sprintf("s%02d", i)] = expect.SecurityScheme{Type: expect.SchemeAPIKey, In: "header", Name: "k"}
	}
	schemes := func(n int) map[string]any {
		m := map[string]any{}
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("s%02d", i)] = map[string]any{"key": "k"}
		}
		return m
	}
	scopes := func(n, size int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%0*d", size, i)
		}
		return out
	}
	// pad puts text before the PEM blocks (ignored by the parser) so the
	// field is exactly n bytes.
	pad := func(pem string, n int) string { return strings.Repeat("x", n-len(pem)-1) + "\n" + pem }
	cases := []struct {
		name, path string
		card       expect.Card
		at, past   map[string]any
	}{
		{"schemes", "credentials", manyCard, schemes(MaxSchemes), schemes(MaxSchemes + 1)},
		{"field bytes", "credentials.bearer.token", allSchemes(),
			map[string]any{"bearer": map[string]any{"token": strings.Repeat("t", MaxFieldBytes)}},
			map[string]any{"bearer": map[string]any{"token": strings.Repeat("t", MaxFieldBytes+1)}}},
		{"scopes", "credentials.oauth.scopes", allSchemes(),
			map[string]any{"oauth": map[string]any{"clientId": "c", "clientSecret": "s", "scopes": scopes(MaxScopes, 3)}},
			map[string]any{"oauth": map[string]any{"clientId": "c", "clientSecret": "s", "scopes": scopes(MaxScopes+1, 3)}}},
		{"scope bytes", "credentials.oauth.scopes[0]", allSchemes(),
			map[string]any{"oauth": map[string]any{"clientId": "c", "clientSecret": "s", "scopes": scopes(1, 256)}},
			map[string]any{"oauth": map[string]any{"clientId": "c", "clientSecret": "s", "scopes": scopes(1, 257)}}},
		{"PEM bytes", "credentials.mtls.certificate", allSchemes(),
			map[string]any{"mtls": map[string]any{"certificate": pad(certPEM, MaxPEMBytes), "privateKey": keyPEM}},
			map[string]any{"mtls": map[string]any{"certificate": pad(certPEM, MaxPEMBytes+1), "privateKey": keyPEM}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at, _ := json.Marshal(map[string]any{"credentials": tc.at})
			if _, err := Parse(tc.card, at); err != nil {
				t.Fatalf("at the limit: %v", err)
			}
			past, _ := json.Marshal(map[string]any{"credentials": tc.past})
			_, err := Parse(tc.card, past)
			e, ok := err.(*errs.Error)
			if !ok || e.Code != errs.Invalid {
				t.Fatalf("past the limit: %v", err)
			}
			for _, f := range e.Fields {
				if f.Path == tc.path {
					return
				}
			}
			t.Fatalf("past the limit: no error at %s: %+v", tc.path, e.Fields)
		})
	}
}
