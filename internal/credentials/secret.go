// Package credentials holds what clockwork presents to agents that require
// authentication: one secret per security scheme the agent's card declares
// (a bearer token, a username and password, an API key, OAuth 2.0 or
// OpenID Connect client credentials, or a client certificate and key). The
// secrets are validated against the card, sealed with a key the store does
// not hold (Sealer: AES-256-GCM with a key file on the embedded default,
// KMS on AWS) and opened only by the process that sends lapse tasks.
//
// No value of this package renders a secret: Secret and Set print as
// "[redacted]" through fmt and slog, and errors name schemes and fields,
// never values.
package credentials

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
)

// Limits of a credentials body.
const (
	// MaxSchemes bounds the schemes one PUT may configure.
	MaxSchemes = 16
	// MaxFieldBytes bounds one text field (token, key, password, ...).
	MaxFieldBytes = 8 << 10
	// MaxPEMBytes bounds a certificate chain or a private key in PEM.
	MaxPEMBytes = 64 << 10
	// MaxScopes bounds the scopes of one OAuth 2.0 or OpenID Connect
	// scheme.
	MaxScopes = 32
)

// Secret is what clockwork holds for one security scheme of an agent. Which
// fields are set depends on the scheme's type: Token (HTTP bearer),
// Username and Password (HTTP basic), Key (API key), ClientID, ClientSecret
// and Scopes (OAuth 2.0 client credentials and OpenID Connect), Certificate
// and PrivateKey in PEM (mutual TLS).
type Secret struct {
	Token        string   `json:"token,omitempty"`
	Username     string   `json:"username,omitempty"`
	Password     string   `json:"password,omitempty"`
	Key          string   `json:"key,omitempty"`
	ClientID     string   `json:"clientId,omitempty"`
	ClientSecret string   `json:"clientSecret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	Certificate  string   `json:"certificate,omitempty"`
	PrivateKey   string   `json:"privateKey,omitempty"`
	// Bound is the card's CredentialBinding for the scheme when the secret
	// was stored: where it may be sent. Load fills it; it is never read
	// from a request body.
	Bound string `json:"-"`
}

// String hides the secret from fmt.
func (Secret) String() string { return "[redacted]" }

// GoString hides the secret from %#v.
func (Secret) GoString() string { return "[redacted]" }

// LogValue hides the secret from slog.
func (Secret) LogValue() slog.Value { return slog.StringValue("[redacted]") }

// Set holds an agent's secrets by scheme name.
type Set map[string]Secret

// String names the schemes only.
func (s Set) String() string { return "credentials for " + strings.Join(s.Names(), ", ") }

// GoString names the schemes only.
func (s Set) GoString() string { return s.String() }

// LogValue names the schemes only.
func (s Set) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Names returns the scheme names, sorted. It never fails.
func (s Set) Names() []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// fieldsOf lists the fields each kind of scheme takes, required first.
func fieldsOf(s expect.SecurityScheme) (required, optional []string, why string) {
	switch s.Type {
	case expect.SchemeHTTP:
		switch s.HTTPScheme {
		case "bearer":
			return []string{"token"}, nil, ""
		case "basic":
			return []string{"username", "password"}, nil, ""
		}
		return nil, nil, fmt.Sprintf("the HTTP authentication scheme %q is not supported (Bearer and Basic are)", s.HTTPScheme)
	case expect.SchemeAPIKey:
		return []string{"key"}, nil, ""
	case expect.SchemeOAuth2:
		if s.TokenURL == "" {
			return nil, nil, "the scheme declares no clientCredentials flow, the only OAuth 2.0 flow a service can use"
		}
		return []string{"clientId", "clientSecret"}, []string{"scopes"}, ""
	case expect.SchemeOpenIDConnect:
		return []string{"clientId", "clientSecret"}, []string{"scopes"}, ""
	case expect.SchemeMutualTLS:
		return []string{"certificate", "privateKey"}, nil, ""
	}
	return nil, nil, fmt.Sprintf("security scheme type %q is not supported", s.Type)
}

// Parse reads a credentials body, {"credentials": {"<scheme name>":
// {...}}}, and checks it against the card: every scheme name must be
// declared in the card's securitySchemes, and each object must hold exactly
// the fields its scheme's type takes (see Secret), as non-empty strings
// without control characters within MaxFieldBytes (MaxPEMBytes for PEM);
// a certificate and key must form a usable pair; scopes are at most
// MaxScopes non-empty strings. It returns the Set or an *errs.Error with
// Code errs.Invalid whose Fields name every failing field by its JSON path
// ("credentials.bearer.token"). Messages never contain a submitted value.
// It never panics.
func Parse(card expect.Card, body []byte) (Set, error) {
	var c errs.Collector
	const msg = "invalid credentials"
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		c.Add("", "the body must be a JSON object {\"credentials\": {...}}")
		return nil, c.Err(msg)
	}
	for k := range top {
		if k != "credentials" {
			c.Add(k, "is not a known field (only credentials)")
		}
	}
	raw, ok := top["credentials"]
	var entries map[string]json.RawMessage
	if !ok || json.Unmarshal(raw, &entries) != nil || entries == nil {
		c.Add("credentials", "required: an object of credentials by security scheme name")
		return nil, c.Err(msg)
	}
	if len(entries) == 0 {
		c.Add("credentials", "must configure at least one scheme; DELETE removes them all")
	}
	if len(entries) > MaxSchemes {
		c.Add("credentials", "at most %d schemes", MaxSchemes)
		return nil, c.Err(msg)
	}
	set := Set{}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		path := "credentials." + name
		scheme, declared := card.SecuritySchemes[name]
		if !declared {
			declaredNames := make([]string, 0, len(card.SecuritySchemes))
			for n := range card.SecuritySchemes {
				declaredNames = append(declaredNames, n)
			}
			sort.Strings(declaredNames)
			list := "none"
			if len(declaredNames) > 0 {
				list = strings.Join(declaredNames, ", ")
			}
			c.Add(path, "the agent's card declares no security scheme of this name (declared: %s)", list)
			continue
		}
		if s, ok := parseSecret(&c, path, scheme, entries[name]); ok {
			set[name] = s
		}
	}
	if err := c.Err(msg); err != nil {
		return nil, err
	}
	return set, nil
}

// parseSecret reads one scheme's object.
func parseSecret(c *errs.Collector, path string, scheme expect.SecurityScheme, raw json.RawMessage) (Secret, bool) {
	required, optional, why := fieldsOf(scheme)
	if why != "" {
		c.Add(path, "%s", why)
		return Secret{}, false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		c.Add(path, "must be an object with %s", strings.Join(append(slices.Clone(required), optional...), ", "))
		return Secret{}, false
	}
	allowed := append(slices.Clone(required), optional...)
	ok := true
	for k := range obj {
		if !slices.Contains(allowed, k) {
			c.Add(path+"."+k, "is not a field of a %s scheme (fields: %s)", describeType(scheme), strings.Join(allowed, ", "))
			ok = false
		}
	}
	text := map[string]string{}
	for _, f := range required {
		v, present := obj[f]
		if !present || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			c.Add(path+"."+f, "required for a %s scheme", describeType(scheme))
			ok = false
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			c.Add(path+"."+f, "must be a string")
			ok = false
			continue
		}
		limit := MaxFieldBytes
		if f == "certificate" || f == "privateKey" {
			limit = MaxPEMBytes
		}
		switch {
		case strings.TrimSpace(s) == "":
			c.Add(path+"."+f, "must not be empty")
			ok = false
			continue
		case len(s) > limit:
			c.Add(path+"."+f, "at most %d bytes", limit)
			ok = false
			continue
		case limit == MaxFieldBytes && hasControl(s):
			c.Add(path+"."+f, "must not contain control characters")
			ok = false
			continue
		case f == "username" && strings.Contains(s, ":"):
			c.Add(path+"."+f, "must not contain ':' (HTTP Basic joins username and password with it)")
			ok = false
			continue
		}
		text[f] = s
	}
	var scopes []string
	if v, present := obj["scopes"]; present && slices.Contains(optional, "scopes") && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		if err := json.Unmarshal(v, &scopes); err != nil {
			c.Add(path+".scopes", "must be an array of strings")
			ok = false
		} else if len(scopes) > MaxScopes {
			c.Add(path+".scopes", "at most %d scopes", MaxScopes)
			ok = false
		} else {
			for i, sc := range scopes {
				if strings.TrimSpace(sc) == "" || len(sc) > 256 || strings.ContainsFunc(sc, func(r rune) bool { return r == ' ' || unicode.IsControl(r) }) {
					c.Add(fmt.Sprintf("%s.scopes[%d]", path, i), "must be a non-empty scope of at most 256 bytes without spaces")
					ok = false
				}
			}
		}
	}
	if !ok {
		return Secret{}, false
	}
	s := Secret{Token: text["token"], Username: text["username"], Password: text["password"], Key: text["key"],
		ClientID: text["clientId"], ClientSecret: text["clientSecret"], Scopes: scopes,
		Certificate: text["certificate"], PrivateKey: text["privateKey"]}
	if scheme.Type == expect.SchemeMutualTLS {
		if _, err := tls.X509KeyPair([]byte(s.Certificate), []byte(s.PrivateKey)); err != nil {
			c.Add(path+".certificate", "certificate and privateKey must be a PEM certificate chain and its matching PEM private key")
			return Secret{}, false
		}
	}
	return s, true
}

func describeType(s expect.SecurityScheme) string {
	switch s.Type {
	case expect.SchemeHTTP:
		return "HTTP " + s.HTTPScheme
	case expect.SchemeAPIKey:
		return "API key"
	case expect.SchemeOAuth2:
		return "OAuth 2.0"
	case expect.SchemeOpenIDConnect:
		return "OpenID Connect"
	case expect.SchemeMutualTLS:
		return "mutual TLS"
	}
	return s.Type
}

func hasControl(s string) bool {
	return strings.ContainsFunc(s, unicode.IsControl)
}
