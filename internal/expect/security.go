package expect

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/agentclock/clockwork/internal/errs"
)

// Security scheme types, named as in A2A 0.3 and OpenAPI (the 1.0 card's
// wrapper objects map onto the same names).
const (
	SchemeHTTP          = "http"
	SchemeAPIKey        = "apiKey"
	SchemeOAuth2        = "oauth2"
	SchemeOpenIDConnect = "openIdConnect"
	SchemeMutualTLS     = "mutualTLS"
)

// SecurityScheme is one entry of a card's securitySchemes, read from either
// card version.
type SecurityScheme struct {
	// Type is one of SchemeHTTP, SchemeAPIKey, SchemeOAuth2,
	// SchemeOpenIDConnect and SchemeMutualTLS.
	Type string `json:"type"`
	// HTTPScheme is the HTTP authentication scheme in lower case
	// ("bearer", "basic", ...) when Type is SchemeHTTP.
	HTTPScheme string `json:"scheme,omitempty"`
	// In ("header", "query" or "cookie") and Name locate an API key.
	In   string `json:"in,omitempty"`
	Name string `json:"name,omitempty"`
	// TokenURL is the token endpoint of the OAuth 2.0 clientCredentials
	// flow ("" when the scheme declares no such flow); Scopes are the
	// scopes the flow declares, sorted.
	TokenURL string   `json:"tokenUrl,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	// OpenIDConnectURL is the OpenID Connect discovery URL.
	OpenIDConnectURL string `json:"openIdConnectUrl,omitempty"`
}

// SecurityRequirement is one alternative of a card's security
// requirements: every scheme it names (with the scopes it asks for) must be
// satisfied together.
type SecurityRequirement map[string][]string

// Names returns the requirement's scheme names, sorted. It never fails.
func (r SecurityRequirement) Names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// securityKeys are the top-level card fields cardSecurity reads; ParseCard
// hides them from the SDK's decoder, which knows only the 1.0 shapes.
var securityKeys = []string{"securitySchemes", "securityRequirements", "security"}

// cardSecurity reads securitySchemes and the security requirements of a
// card in either version: 1.0 wrapper objects
// ({"httpAuthSecurityScheme": {"scheme": "Bearer"}}) with
// securityRequirements [{"schemes": {"name": [scopes]}}] (the scopes also
// as {"list": [...]}), or 0.3 objects ({"type": "http", "scheme":
// "bearer"}) with security [{"name": [scopes]}]. The shape of each entry
// decides how it is read, so a card mixing the two is read too.
func cardSecurity(c *errs.Collector, top map[string]json.RawMessage) (map[string]SecurityScheme, []SecurityRequirement) {
	var schemes map[string]SecurityScheme
	if raw, ok := cardField(top, "securitySchemes"); ok {
		var entries map[string]json.RawMessage
		if err := json.Unmarshal(raw, &entries); err != nil {
			c.Add("securitySchemes", "must be an object of named security schemes")
		} else {
			schemes = make(map[string]SecurityScheme, len(entries))
			for _, name := range sortedKeys(entries) {
				if s, ok := parseScheme(c, "securitySchemes."+name, entries[name]); ok {
					schemes[name] = s
				}
			}
		}
	}

	var reqs []SecurityRequirement
	field := "securityRequirements"
	raw, ok := cardField(top, field)
	if !ok {
		field = "security"
		raw, ok = cardField(top, field)
	}
	if !ok {
		return schemes, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		c.Add(field, "must be an array of security requirements")
		return schemes, nil
	}
	for i, item := range items {
		path := fmt.Sprintf("%s[%d]", field, i)
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(item, &obj); err != nil || obj == nil {
			c.Add(path, "must be an object")
			continue
		}
		// 1.0 wraps the map in "schemes"; 0.3 is the map itself.
		if inner, ok := obj["schemes"]; ok && field == "securityRequirements" {
			obj = nil
			path += ".schemes"
			if err := json.Unmarshal(inner, &obj); err != nil || obj == nil {
				c.Add(path, "must be an object of scheme names")
				continue
			}
		}
		req := SecurityRequirement{}
		for _, name := range sortedKeys(obj) {
			scopes, ok := parseScopes(obj[name])
			if !ok {
				c.Add(path+"."+name, "must be an array of scopes")
				continue
			}
			if _, declared := schemes[name]; !declared {
				c.Add(path+"."+name, "names no scheme in securitySchemes (declared: %s)", cardSkillList(sortedKeys(schemes)))
				continue
			}
			req[name] = scopes
		}
		reqs = append(reqs, req)
	}
	return schemes, reqs
}

// parseScopes reads a requirement's scopes: an array of strings, or the
// 1.0 proto JSON {"list": [...]}; null means none.
func parseScopes(raw json.RawMessage) ([]string, bool) {
	if strings.TrimSpace(string(raw)) == "null" {
		return []string{}, true
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, true
	}
	var wrapped struct {
		List []string `json:"list"`
	}
	if err := json.Unmarshal(raw, &wrapped); err == nil {
		if wrapped.List == nil {
			wrapped.List = []string{}
		}
		return wrapped.List, true
	}
	return nil, false
}

// schemeWrappers maps the 1.0 card's wrapper keys to scheme types.
var schemeWrappers = map[string]string{
	"httpAuthSecurityScheme":      SchemeHTTP,
	"apiKeySecurityScheme":        SchemeAPIKey,
	"oauth2SecurityScheme":        SchemeOAuth2,
	"openIdConnectSecurityScheme": SchemeOpenIDConnect,
	"mtlsSecurityScheme":          SchemeMutualTLS,
}

// schemeFields is one scheme's fields in either version (1.0 says
// "location" where 0.3 says "in").
type schemeFields struct {
	Type             string          `json:"type"`
	Scheme           string          `json:"scheme"`
	In               string          `json:"in"`
	Location         string          `json:"location"`
	Name             string          `json:"name"`
	OpenIDConnectURL string          `json:"openIdConnectUrl"`
	Flows            json.RawMessage `json:"flows"`
}

// parseScheme reads one named scheme.
func parseScheme(c *errs.Collector, path string, raw json.RawMessage) (SecurityScheme, bool) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		c.Add(path, "must be an object")
		return SecurityScheme{}, false
	}
	var s SecurityScheme
	body := raw
	if _, ok := obj["type"]; !ok {
		// 1.0: exactly one wrapper key.
		var found []string
		for k := range obj {
			if _, ok := schemeWrappers[k]; ok {
				found = append(found, k)
			}
		}
		if len(found) != 1 {
			c.Add(path, "must hold exactly one of httpAuthSecurityScheme, apiKeySecurityScheme, oauth2SecurityScheme, openIdConnectSecurityScheme, mtlsSecurityScheme (1.0) or a type (0.3)")
			return SecurityScheme{}, false
		}
		s.Type = schemeWrappers[found[0]]
		path += "." + found[0]
		body = obj[found[0]]
	}
	var f schemeFields
	if err := json.Unmarshal(body, &f); err != nil {
		c.Add(path, "must be an object of string fields")
		return SecurityScheme{}, false
	}
	if s.Type == "" {
		switch f.Type {
		case SchemeHTTP, SchemeAPIKey, SchemeOAuth2, SchemeOpenIDConnect, SchemeMutualTLS:
			s.Type = f.Type
		default:
			c.Add(path+".type", "must be one of http, apiKey, oauth2, openIdConnect, mutualTLS, not %q", f.Type)
			return SecurityScheme{}, false
		}
	}
	ok := true
	switch s.Type {
	case SchemeHTTP:
		s.HTTPScheme = strings.ToLower(strings.TrimSpace(f.Scheme))
		if s.HTTPScheme == "" {
			c.Add(path+".scheme", "required: the HTTP authentication scheme (Bearer, Basic)")
			ok = false
		}
	case SchemeAPIKey:
		locField, loc := "location", f.Location
		if _, is03 := obj["type"]; is03 {
			locField, loc = "in", f.In
		}
		s.In = strings.ToLower(loc)
		if s.In != "header" && s.In != "query" && s.In != "cookie" {
			c.Add(path+"."+locField, "must be header, query or cookie, not %q", loc)
			ok = false
		}
		s.Name = f.Name
		if strings.TrimSpace(f.Name) == "" || strings.ContainsAny(f.Name, "\r\n:;= ") {
			c.Add(path+".name", "required: the name of the header, query parameter or cookie (no spaces, ':', ';', '=')")
			ok = false
		}
	case SchemeOAuth2:
		var flows struct {
			ClientCredentials *struct {
				TokenURL string            `json:"tokenUrl"`
				Scopes   map[string]string `json:"scopes"`
			} `json:"clientCredentials"`
		}
		if len(f.Flows) > 0 {
			if err := json.Unmarshal(f.Flows, &flows); err != nil {
				c.Add(path+".flows", "must be an object of OAuth 2.0 flows")
				ok = false
			}
		}
		if cc := flows.ClientCredentials; cc != nil {
			if why := cardCheckURL(cc.TokenURL); why != "" {
				c.Add(path+".flows.clientCredentials.tokenUrl", "%s", why)
				ok = false
			}
			s.TokenURL = cc.TokenURL
			for sc := range cc.Scopes {
				s.Scopes = append(s.Scopes, sc)
			}
			slices.Sort(s.Scopes)
		}
	case SchemeOpenIDConnect:
		if why := cardCheckURL(f.OpenIDConnectURL); why != "" {
			c.Add(path+".openIdConnectUrl", "%s", why)
			ok = false
		}
		s.OpenIDConnectURL = f.OpenIDConnectURL
	}
	return s, ok
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// withoutSecurity returns raw without the top-level security fields, for
// the SDK's decoder (which fails on 0.3 scheme shapes); raw itself when it
// has none.
func withoutSecurity(raw []byte, top map[string]json.RawMessage) []byte {
	found := false
	for _, k := range securityKeys {
		if _, ok := top[k]; ok {
			found = true
		}
	}
	if !found {
		return raw
	}
	rest := make(map[string]json.RawMessage, len(top))
	for k, v := range top {
		if !slices.Contains(securityKeys, k) {
			rest[k] = v
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return raw
	}
	return b
}

// CredentialBinding is where and how a credential stored for the card's
// scheme may be sent: the origin of the card's A2A endpoint; for an API
// key where it goes (header, query or cookie, and its name); for HTTP
// authentication the scheme; and for OAuth 2.0 and OpenID Connect the
// token or discovery URL that receives the client secret. Credentials are stored with it and used only while the card
// still gives the same binding, so re-pointing a card (its endpoint or a
// scheme's token URL) at another host never carries a stored secret there.
// It is "" for a scheme the card does not declare.
func (c Card) CredentialBinding(scheme string) string {
	s, ok := c.SecuritySchemes[scheme]
	if !ok {
		return ""
	}
	b := s.Type + " to " + OriginOf(c.URL)
	switch s.Type {
	case SchemeHTTP:
		b += " " + s.HTTPScheme
	case SchemeAPIKey:
		// Where the key goes: a header moved to the query would put it in
		// access logs and Referer headers.
		b += " in " + s.In + " " + s.Name
	case SchemeOAuth2:
		b += " token " + s.TokenURL
	case SchemeOpenIDConnect:
		b += " discovery " + s.OpenIDConnectURL
	}
	return b
}

// OriginOf returns the scheme, host and port of a URL ("https://h:443"),
// the unit to which credentials are bound; ports are explicit, so https://h
// and https://h:443 are one origin. It is "" for a URL without a host.
func OriginOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}
