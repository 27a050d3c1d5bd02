package expect

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/errs"
)

// TestParseCardSecurity reads every scheme type in both card versions and
// refuses what does not fit, naming the field.
func TestParseCardSecurity(t *testing.T) {
	v1 := map[string]any{
		"bearer":   map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer", "bearerFormat": "JWT"}},
		"basic":    map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Basic"}},
		"hdr":      map[string]any{"apiKeySecurityScheme": map[string]any{"location": "header", "name": "X-Api-Key"}},
		"qry":      map[string]any{"apiKeySecurityScheme": map[string]any{"location": "query", "name": "api_key"}},
		"cookie":   map[string]any{"apiKeySecurityScheme": map[string]any{"location": "cookie", "name": "session"}},
		"oauth":    map[string]any{"oauth2SecurityScheme": map[string]any{"flows": map[string]any{"clientCredentials": map[string]any{"tokenUrl": "https://auth.example.com/token", "scopes": map[string]any{"b": "B", "a": "A"}}}}},
		"oidc":     map[string]any{"openIdConnectSecurityScheme": map[string]any{"openIdConnectUrl": "https://auth.example.com/.well-known/openid-configuration"}},
		"mtls":     map[string]any{"mtlsSecurityScheme": map[string]any{}},
		"authcode": map[string]any{"oauth2SecurityScheme": map[string]any{"flows": map[string]any{"authorizationCode": map[string]any{"authorizationUrl": "https://a/x", "tokenUrl": "https://a/t", "scopes": map[string]any{}}}}},
	}
	v03 := map[string]any{
		"bearer":   map[string]any{"type": "http", "scheme": "bearer"},
		"basic":    map[string]any{"type": "http", "scheme": "basic"},
		"hdr":      map[string]any{"type": "apiKey", "in": "header", "name": "X-Api-Key"},
		"qry":      map[string]any{"type": "apiKey", "in": "query", "name": "api_key"},
		"cookie":   map[string]any{"type": "apiKey", "in": "cookie", "name": "session"},
		"oauth":    map[string]any{"type": "oauth2", "flows": map[string]any{"clientCredentials": map[string]any{"tokenUrl": "https://auth.example.com/token", "scopes": map[string]any{"b": "B", "a": "A"}}}},
		"oidc":     map[string]any{"type": "openIdConnect", "openIdConnectUrl": "https://auth.example.com/.well-known/openid-configuration"},
		"mtls":     map[string]any{"type": "mutualTLS"},
		"authcode": map[string]any{"type": "oauth2", "flows": map[string]any{"authorizationCode": map[string]any{"authorizationUrl": "https://a/x", "tokenUrl": "https://a/t", "scopes": map[string]any{}}}},
	}
	want := map[string]SecurityScheme{
		"bearer":   {Type: SchemeHTTP, HTTPScheme: "bearer"},
		"basic":    {Type: SchemeHTTP, HTTPScheme: "basic"},
		"hdr":      {Type: SchemeAPIKey, In: "header", Name: "X-Api-Key"},
		"qry":      {Type: SchemeAPIKey, In: "query", Name: "api_key"},
		"cookie":   {Type: SchemeAPIKey, In: "cookie", Name: "session"},
		"oauth":    {Type: SchemeOAuth2, TokenURL: "https://auth.example.com/token", Scopes: []string{"a", "b"}},
		"oidc":     {Type: SchemeOpenIDConnect, OpenIDConnectURL: "https://auth.example.com/.well-known/openid-configuration"},
		"mtls":     {Type: SchemeMutualTLS},
		"authcode": {Type: SchemeOAuth2},
	}
	wantReqs := []SecurityRequirement{{"oauth": {"a"}}, {"hdr": {}, "mtls": {}}}

	for _, tc := range []struct {
		name string
		card map[string]any
	}{
		{"1.0", func() map[string]any {
			c := cardV1Fixture()
			c["securitySchemes"] = v1
			c["securityRequirements"] = []any{
				map[string]any{"schemes": map[string]any{"oauth": []any{"a"}}},
				map[string]any{"schemes": map[string]any{"hdr": map[string]any{"list": []any{}}, "mtls": []any{}}},
			}
			return c
		}()},
		{"0.3", func() map[string]any {
			c := cardV03Fixture()
			c["securitySchemes"] = v03
			c["security"] = []any{map[string]any{"oauth": []any{"a"}}, map[string]any{"hdr": []any{}, "mtls": nil}}
			return c
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			card, err := ParseCard("a", cardJSON(t, tc.card))
			if err != nil {
				t.Fatalf("ParseCard: %v", err)
			}
			if !reflect.DeepEqual(card.SecuritySchemes, want) {
				t.Errorf("schemes = %+v\nwant %+v", card.SecuritySchemes, want)
			}
			if !reflect.DeepEqual(card.Security, wantReqs) {
				t.Errorf("requirements = %+v, want %+v", card.Security, wantReqs)
			}
		})
	}

	t.Run("none", func(t *testing.T) {
		card, err := ParseCard("a", cardJSON(t, cardV1Fixture()))
		if err != nil || card.SecuritySchemes != nil || card.Security != nil {
			t.Fatalf("card without security: %+v, %v", card, err)
		}
	})

	bad := []struct {
		name, path string
		v03        bool
		schemes    any
		reqs       any
	}{
		{"unknown 0.3 type", "securitySchemes.x.type", true, map[string]any{"x": map[string]any{"type": "weird"}}, nil},
		{"no 1.0 wrapper", "securitySchemes.x", false, map[string]any{"x": map[string]any{"other": map[string]any{}}}, nil},
		{"two 1.0 wrappers", "securitySchemes.x", false, map[string]any{"x": map[string]any{"mtlsSecurityScheme": map[string]any{}, "httpAuthSecurityScheme": map[string]any{"scheme": "Bearer"}}}, nil},
		{"http without scheme", "securitySchemes.x.httpAuthSecurityScheme.scheme", false, map[string]any{"x": map[string]any{"httpAuthSecurityScheme": map[string]any{}}}, nil},
		{"api key bad location 1.0", "securitySchemes.x.apiKeySecurityScheme.location", false, map[string]any{"x": map[string]any{"apiKeySecurityScheme": map[string]any{"location": "body", "name": "k"}}}, nil},
		{"api key bad in 0.3", "securitySchemes.x.in", true, map[string]any{"x": map[string]any{"type": "apiKey", "in": "body", "name": "k"}}, nil},
		{"api key no name", "securitySchemes.x.name", true, map[string]any{"x": map[string]any{"type": "apiKey", "in": "header", "name": ""}}, nil},
		{"api key name with colon", "securitySchemes.x.name", true, map[string]any{"x": map[string]any{"type": "apiKey", "in": "header", "name": "a:b"}}, nil},
		{"relative token url", "securitySchemes.x.flows.clientCredentials.tokenUrl", true, map[string]any{"x": map[string]any{"type": "oauth2", "flows": map[string]any{"clientCredentials": map[string]any{"tokenUrl": "/token"}}}}, nil},
		{"oidc without url", "securitySchemes.x.openIdConnectSecurityScheme.openIdConnectUrl", false, map[string]any{"x": map[string]any{"openIdConnectSecurityScheme": map[string]any{}}}, nil},
		{"schemes not an object", "securitySchemes", false, []any{1}, nil},
		{"requirement names undeclared 1.0", "securityRequirements[0].schemes.nope", false, map[string]any{"x": map[string]any{"mtlsSecurityScheme": map[string]any{}}}, []any{map[string]any{"schemes": map[string]any{"nope": []any{}}}}},
		{"requirement names undeclared 0.3", "security[1].nope", true, map[string]any{"x": map[string]any{"type": "mutualTLS"}}, []any{map[string]any{"x": []any{}}, map[string]any{"nope": []any{}}}},
		{"requirement scopes not strings", "security[0].x", true, map[string]any{"x": map[string]any{"type": "mutualTLS"}}, []any{map[string]any{"x": []any{1}}}},
		{"requirements not an array", "securityRequirements", false, nil, map[string]any{}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c := cardV1Fixture()
			reqField := "securityRequirements"
			if tc.v03 {
				c = cardV03Fixture()
				reqField = "security"
			}
			if tc.schemes != nil {
				c["securitySchemes"] = tc.schemes
			}
			if tc.reqs != nil {
				c[reqField] = tc.reqs
			}
			_, err := ParseCard("a", cardJSON(t, c))
			var e *errs.Error
			if err == nil || !errors.As(err, &e) {
				t.Fatalf("accepted or not an errs.Error: %v", err)
			}
			var paths []string
			for _, f := range e.Fields {
				paths = append(paths, f.Path)
				if f.Path == tc.path {
					return
				}
			}
			t.Fatalf("no error at %s: %s", tc.path, strings.Join(paths, ", "))
		})
	}
}
