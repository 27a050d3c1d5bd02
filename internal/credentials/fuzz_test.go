package credentials

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/errs"
)

// FuzzParse feeds arbitrary credentials bodies to Parse against a card with
// one scheme of each kind: it never panics, refuses with an Invalid error
// naming fields (none of which repeats a submitted secret-like value), and
// what it accepts names only declared schemes and parses again the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"credentials":{"bearer":{"token":"t"}}}`,
		`{"credentials":{"basic":{"username":"u","password":"p"},"key":{"key":"k"}}}`,
		`{"credentials":{"oauth":{"clientId":"c","clientSecret":"s","scopes":["a"]},"oidc":{"clientId":"c","clientSecret":"s"}}}`,
		`{"credentials":{"mtls":{"certificate":"-----BEGIN CERTIFICATE-----\n","privateKey":"x"}}}`,
		`{"credentials":{"nope":{}}}`, `{"credentials":null}`, `[]`, `{"credentials":{"bearer":{"token":"a\u0000b"}}}`,
	} {
		f.Add([]byte(s))
	}
	card := allSchemes()
	f.Fuzz(func(t *testing.T, body []byte) {
		set, err := Parse(card, body)
		if err != nil {
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != errs.Invalid || len(e.Fields) == 0 {
				t.Fatalf("error %v is not Invalid with fields", err)
			}
			var values []string
			collectStrings(body, &values)
			for _, fe := range e.Fields {
				for _, v := range values {
					// Values that look like secrets (12+ bytes, a digit, no
					// space), so the vocabulary of messages cannot match.
					if len(v) >= 12 && strings.ContainsAny(v, "0123456789") && !strings.ContainsRune(v, ' ') && strings.Contains(fe.Message, v) {
						t.Fatalf("error message repeats a submitted value: %q", fe.Message)
					}
				}
			}
			return
		}
		for name := range set {
			if _, ok := card.SecuritySchemes[name]; !ok {
				t.Fatalf("accepted undeclared scheme %q", name)
			}
		}
		again, err := json.Marshal(map[string]any{"credentials": set})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(card, again); err != nil {
			t.Fatalf("accepted set does not parse again: %v", err)
		}
	})
}

// collectStrings gathers the string values of a JSON document (nothing
// when it is not JSON).
func collectStrings(body []byte, out *[]string) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return
	}
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			*out = append(*out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
}
