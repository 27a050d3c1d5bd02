package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// The keys of an API Gateway Lambda authorizer's context that carry a
// principal. Context values must be strings, numbers or booleans, so the
// scopes are space-separated (as in OAuth) and the agents a JSON array.
const (
	ContextPrincipal = "principal"
	ContextScopes    = "scopes"
	ContextAgents    = "agents"
)

// Context encodes p as a Lambda authorizer context (see FromContext).
func (p *Principal) Context() map[string]any {
	scopes := make([]string, len(p.Scopes))
	for i, s := range p.Scopes {
		scopes[i] = string(s)
	}
	agents, _ := json.Marshal(p.Agents) // a []string always encodes
	return map[string]any{
		ContextPrincipal: p.Name,
		ContextScopes:    strings.Join(scopes, " "),
		ContextAgents:    string(agents),
	}
}

// FromContext decodes the principal a Lambda authorizer put in its context.
// A missing or malformed key, or an unknown scope, is an error: a caller
// must then refuse the request (fail closed), never guess.
func FromContext(m map[string]any) (*Principal, error) {
	str := func(key string) (string, error) {
		v, ok := m[key].(string)
		if !ok {
			return "", fmt.Errorf("authorizer context: %s is missing or not a string", key)
		}
		return v, nil
	}
	name, err := str(ContextPrincipal)
	if err != nil {
		return nil, err
	}
	if name == "" {
		return nil, errors.New("authorizer context: principal is empty")
	}
	rawScopes, err := str(ContextScopes)
	if err != nil {
		return nil, err
	}
	rawAgents, err := str(ContextAgents)
	if err != nil {
		return nil, err
	}
	p := &Principal{Name: name}
	for _, s := range strings.Fields(rawScopes) {
		if !slices.Contains(AllScopes, Scope(s)) {
			return nil, fmt.Errorf("authorizer context: unknown scope %q", s)
		}
		p.Scopes = append(p.Scopes, Scope(s))
	}
	if err := json.Unmarshal([]byte(rawAgents), &p.Agents); err != nil {
		return nil, fmt.Errorf("authorizer context: agents is not a JSON array of strings: %w", err)
	}
	return p, nil
}

// AuthenticateRequest authenticates the request's Authorization header (see
// Authenticate).
func (a *Authenticator) AuthenticateRequest(r *http.Request) (*Principal, bool) {
	return a.Authenticate(r.Header.Get("Authorization"))
}

// PushCredential returns the credential of a request to a route where A2A
// pushes land, as an Authorization header value: the Authorization header
// when there is one (it alone counts then, valid or not), else the
// NotificationTokenHeader's token as a bearer token, else "".
func PushCredential(authorization, notificationToken string) string {
	if authorization != "" {
		return authorization
	}
	if notificationToken != "" {
		return "Bearer " + notificationToken
	}
	return ""
}

// Parse builds an authenticator from a tokens file's content (see File). A
// malformed file or entry is an error naming it.
func Parse(raw []byte) (*Authenticator, error) {
	var f File
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return New(f.Tokens)
}
