package credentials

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// allSchemes is a card with one scheme of each kind.
func allSchemes() expect.Card {
	return expect.Card{AgentID: "a", SecuritySchemes: map[string]expect.SecurityScheme{
		"bearer": {Type: expect.SchemeHTTP, HTTPScheme: "bearer"},
		"basic":  {Type: expect.SchemeHTTP, HTTPScheme: "basic"},
		"digest": {Type: expect.SchemeHTTP, HTTPScheme: "digest"},
		"key":    {Type: expect.SchemeAPIKey, In: "query", Name: "k"},
		"oauth":  {Type: expect.SchemeOAuth2, TokenURL: "https://auth/token"},
		"code":   {Type: expect.SchemeOAuth2},
		"oidc":   {Type: expect.SchemeOpenIDConnect, OpenIDConnectURL: "https://auth/.well-known/openid-configuration"},
		"mtls":   {Type: expect.SchemeMutualTLS},
	}}
}

const leak = "LEAKED-SECRET-VALUE"

func TestParse(t *testing.T) {
	good := `{"credentials":{"bearer":{"token":"t"},"basic":{"username":"u","password":"p"},"key":{"key":"k"},
		"oauth":{"clientId":"c","clientSecret":"s","scopes":["a","b"]},"oidc":{"clientId":"c","clientSecret":"s"}}}`
	set, err := Parse(allSchemes(), []byte(good))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if set["bearer"].Token != "t" || set["basic"].Password != "p" || set["key"].Key != "k" || len(set["oauth"].Scopes) != 2 || set["oidc"].ClientSecret != "s" {
		t.Fatalf("set = %#v", set)
	}

	bad := []struct{ name, body, path string }{
		{"not an object", `[]`, ""},
		{"unknown top field", `{"credentials":{"bearer":{"token":"t"}},"x":1}`, "x"},
		{"no credentials", `{}`, "credentials"},
		{"empty credentials", `{"credentials":{}}`, "credentials"},
		{"undeclared scheme", `{"credentials":{"nope":{"token":"` + leak + `"}}}`, "credentials.nope"},
		{"field of another type", `{"credentials":{"bearer":{"token":"t","password":"` + leak + `"}}}`, "credentials.bearer.password"},
		{"missing token", `{"credentials":{"bearer":{}}}`, "credentials.bearer.token"},
		{"token not a string", `{"credentials":{"bearer":{"token":5}}}`, "credentials.bearer.token"},
		{"empty token", `{"credentials":{"bearer":{"token":"  "}}}`, "credentials.bearer.token"},
		{"token with newline", `{"credentials":{"bearer":{"token":"` + leak + `\r\nX: y"}}}`, "credentials.bearer.token"},
		{"token too long", `{"credentials":{"bearer":{"token":"` + strings.Repeat("x", MaxFieldBytes+1) + `"}}}`, "credentials.bearer.token"},
		{"basic without password", `{"credentials":{"basic":{"username":"u"}}}`, "credentials.basic.password"},
		{"basic username with colon", `{"credentials":{"basic":{"username":"u:` + leak + `","password":"p"}}}`, "credentials.basic.username"},
		{"unsupported http scheme", `{"credentials":{"digest":{"token":"t"}}}`, "credentials.digest"},
		{"api key missing", `{"credentials":{"key":{"token":"t"}}}`, "credentials.key.key"},
		{"oauth without secret", `{"credentials":{"oauth":{"clientId":"c"}}}`, "credentials.oauth.clientSecret"},
		{"oauth scopes not strings", `{"credentials":{"oauth":{"clientId":"c","clientSecret":"s","scopes":[1]}}}`, "credentials.oauth.scopes"},
		{"oauth empty scope", `{"credentials":{"oauth":{"clientId":"c","clientSecret":"s","scopes":["a b"]}}}`, "credentials.oauth.scopes[0]"},
		{"oauth without client credentials flow", `{"credentials":{"code":{"clientId":"c","clientSecret":"s"}}}`, "credentials.code"},
		{"mtls not a pair", `{"credentials":{"mtls":{"certificate":"` + leak + `","privateKey":"` + leak + `"}}}`, "credentials.mtls.certificate"},
		{"mtls without key", `{"credentials":{"mtls":{"certificate":"c"}}}`, "credentials.mtls.privateKey"},
		{"scheme not an object", `{"credentials":{"bearer":"` + leak + `"}}`, "credentials.bearer"},
		{"too many schemes", `{"credentials":{` + strings.Repeat(`"x":{},`, 0) + manySchemes() + `}}`, "credentials"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(allSchemes(), []byte(tc.body))
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != errs.Invalid {
				t.Fatalf("Parse = %v, want Invalid", err)
			}
			if strings.Contains(fmt.Sprint(e, e.Fields), leak) {
				t.Fatalf("the error repeats a submitted value: %v", e.Fields)
			}
			for _, f := range e.Fields {
				if f.Path == tc.path {
					return
				}
			}
			t.Fatalf("no error at %q: %+v", tc.path, e.Fields)
		})
	}
}

func manySchemes() string {
	var parts []string
	for i := 0; i <= MaxSchemes; i++ {
		parts = append(parts, fmt.Sprintf(`"s%d":{}`, i))
	}
	return strings.Join(parts, ",")
}

// TestRedacted: fmt, %#v, JSON of the set's names and slog never show a
// secret.
func TestRedacted(t *testing.T) {
	set := Set{"bearer": {Token: leak}, "basic": {Username: "u", Password: leak}}
	var b strings.Builder
	log := slog.New(slog.NewJSONHandler(&b, nil))
	log.Info("x", "set", set, "secret", set["bearer"])
	out := fmt.Sprintf("%v %+v %#v %s", set, set["bearer"], set["basic"], set) + b.String()
	if strings.Contains(out, leak) {
		t.Fatalf("a secret was rendered: %s", out)
	}
	if !strings.Contains(out, "bearer") {
		t.Fatalf("scheme names missing: %s", out)
	}
	// JSON is how Service seals it; the set itself is never written
	// anywhere else.
	if raw, _ := json.Marshal(set["bearer"]); !strings.Contains(string(raw), leak) {
		t.Fatal("the JSON form used for sealing lost the token")
	}
}
