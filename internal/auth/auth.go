// Package auth authenticates bearer tokens and authorises scopes and agents.
// Tokens are kept only as SHA-256 hashes; a presented token is hashed and
// looked up, and the comparison of hashes is constant-time.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Scope is one permission a token may carry.
type Scope string

// The scopes of the HTTP contract.
const (
	AgentsWrite        Scope = "agents:write"
	ExpectationsWrite  Scope = "expectations:write"
	FactsWrite         Scope = "facts:write"
	AnticipationsWrite Scope = "anticipations:write"
	EventsWrite        Scope = "events:write"
	GradesWrite        Scope = "grades:write"
	// ChannelsWrite configures alert channels (operators).
	ChannelsWrite Scope = "channels:write"
	Read          Scope = "read"
)

// AllScopes lists every scope.
var AllScopes = []Scope{AgentsWrite, ExpectationsWrite, FactsWrite, AnticipationsWrite, EventsWrite, GradesWrite, ChannelsWrite, Read}

// Principal is an authenticated caller.
type Principal struct {
	Name   string
	Scopes []Scope
	// Agents the principal may act for; "*" means all.
	Agents []string
}

// Can reports whether p holds scope.
func (p *Principal) Can(scope Scope) bool { return slices.Contains(p.Scopes, scope) }

// ActsFor reports whether p may act for agentID.
func (p *Principal) ActsFor(agentID string) bool {
	return slices.Contains(p.Agents, "*") || slices.Contains(p.Agents, agentID)
}

// SingleAgent returns the one agent p acts for, or "" when it acts for
// several or for all ("*").
func (p *Principal) SingleAgent() string {
	if len(p.Agents) == 1 && p.Agents[0] != "*" {
		return p.Agents[0]
	}
	return ""
}

// TokenSpec is one entry of the tokens file. Token may be given in plain
// text or as TokenSHA256 (lowercase hex); the file need not hold secrets.
type TokenSpec struct {
	Token       string   `json:"token,omitempty"`
	TokenSHA256 string   `json:"tokenSha256,omitempty"`
	Principal   string   `json:"principal"`
	Scopes      []Scope  `json:"scopes"`
	Agents      []string `json:"agents"`
}

// File is the tokens file: {"tokens":[...]}.
type File struct {
	Tokens []TokenSpec `json:"tokens"`
}

type entry struct {
	hash [32]byte
	p    Principal
}

// Authenticator checks bearer tokens.
type Authenticator struct {
	entries []entry
}

// New builds an authenticator from token specs. An entry without a token,
// principal, or with an unknown scope is an error.
func New(specs []TokenSpec) (*Authenticator, error) {
	a := &Authenticator{}
	for i, s := range specs {
		var h [32]byte
		switch {
		case s.Token != "":
			h = sha256.Sum256([]byte(s.Token))
		case s.TokenSHA256 != "":
			b, err := hex.DecodeString(s.TokenSHA256)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("tokens[%d].tokenSha256: not 64 hex digits", i)
			}
			copy(h[:], b)
		default:
			return nil, fmt.Errorf("tokens[%d]: token or tokenSha256 is required", i)
		}
		if s.Principal == "" {
			return nil, fmt.Errorf("tokens[%d].principal: is required", i)
		}
		for j, sc := range s.Scopes {
			if !slices.Contains(AllScopes, sc) {
				return nil, fmt.Errorf("tokens[%d].scopes[%d]: unknown scope %q", i, j, sc)
			}
		}
		a.entries = append(a.entries, entry{hash: h, p: Principal{Name: s.Principal, Scopes: s.Scopes, Agents: s.Agents}})
	}
	return a, nil
}

// Load reads a tokens file.
func Load(path string) (*Authenticator, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}

// Generate returns a fresh random token.
func Generate() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "cw_" + hex.EncodeToString(b)
}

// NotificationTokenHeader is the header A2A 0.3 push senders authenticate
// with: the token of the push notification config, sent as is (no
// "Bearer " prefix). It is accepted only where an A2A push lands (the
// /a2a route), as the same credential as a bearer token (PushCredential).
const NotificationTokenHeader = "X-A2A-Notification-Token"

// PushRoute is the one route (method and path pattern, as API Gateway
// spells a route key) that takes NotificationTokenHeader.
const PushRoute = "POST /v1/agents/{agentId}/a2a"

// Authenticate returns the principal of an Authorization header value, or
// false. Every entry is compared, in constant time, whatever matches.
func (a *Authenticator) Authenticate(header string) (*Principal, bool) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" || len(tok) > 512 {
		return nil, false
	}
	h := sha256.Sum256([]byte(tok))
	var found *Principal
	for i := range a.entries {
		if subtle.ConstantTimeCompare(h[:], a.entries[i].hash[:]) == 1 {
			found = &a.entries[i].p
		}
	}
	return found, found != nil
}
