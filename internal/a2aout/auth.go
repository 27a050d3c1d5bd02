package a2aout

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/expect"
)

// CredentialSource gives the Sender the credentials of an agent
// (*credentials.Service). An empty Set means none are configured.
type CredentialSource interface {
	Load(ctx context.Context, agentID string) (credentials.Set, error)
}

// authPlan is what one Send attaches for the card's security requirement.
type authPlan struct {
	// schemes are the names of the requirement chosen (sorted); missing
	// those of them without credentials.
	schemes, missing []string
	// unbound are the missing schemes whose stored credentials were bound
	// to another endpoint or token URL than the card's.
	unbound []string
	// sdkScheme/sdkCredential go through the SDK's AuthInterceptor (1.0
	// agents): the first HTTP bearer, OAuth 2.0 or header API key scheme.
	sdkScheme     string
	sdkCredential string
	sdkCard       *a2a.AgentCard
	// header, query and cookies are added by the transport (basic, OpenID
	// Connect, query and cookie API keys, and everything for 0.3 agents).
	header  http.Header
	query   url.Values
	cookies []*http.Cookie
	// cert is the client certificate and key (PEM) of a mutual TLS scheme,
	// certKey their digest (the transport is parsed and kept once per key).
	cert    *credentials.Secret
	certKey [32]byte
	// tokens are the OAuth 2.0 / OpenID Connect tokens used, to drop them
	// when the agent answers 401.
	tokens []tokenKey
}

// chooseRequirement returns the card's first requirement whose schemes all
// have credentials; when none has, the first requirement (so the error
// names what is missing). A card with schemes but no requirements asks
// for every declared scheme that has credentials.
func chooseRequirement(card expect.Card, set credentials.Set) []string {
	if len(card.Security) == 0 {
		var names []string
		for name := range card.SecuritySchemes {
			if _, ok := set[name]; ok {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		return names
	}
	for _, req := range card.Security {
		all := true
		for name := range req {
			if _, ok := set[name]; !ok {
				all = false
			}
		}
		if all {
			return req.Names()
		}
	}
	return card.Security[0].Names()
}

// plan builds the authPlan of one Send. Errors come from the credential
// source or a token endpoint and name the scheme.
func (s *Sender) plan(ctx context.Context, card expect.Card) (*authPlan, error) {
	p := &authPlan{header: http.Header{}, query: url.Values{}}
	if len(card.SecuritySchemes) == 0 {
		return p, nil
	}
	set := credentials.Set{}
	if s.creds != nil {
		var err error
		if set, err = s.creds.Load(ctx, card.AgentID); err != nil {
			return nil, err
		}
	}
	// Credentials stored for another endpoint or token URL than the card
	// now names are never sent (a card PUT drops them; this also covers a
	// send racing that PUT, and credentials stored before they were bound).
	for name, secret := range set {
		if secret.Bound != card.CredentialBinding(name) {
			if len(p.unbound) == 0 {
				set = maps.Clone(set) // the source's cached copy stays intact
			}
			delete(set, name)
			p.unbound = append(p.unbound, name)
		}
	}
	slices.Sort(p.unbound)
	p.schemes = chooseRequirement(card, set)
	byHand := card.ProtocolVersion == expect.ProtocolV03
	for _, name := range p.schemes {
		scheme := card.SecuritySchemes[name]
		secret, ok := set[name]
		if !ok {
			p.missing = append(p.missing, name)
			continue
		}
		switch scheme.Type {
		case expect.SchemeHTTP:
			switch scheme.HTTPScheme {
			case "bearer":
				p.viaSDK(byHand, name, a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}, "Authorization", "Bearer "+secret.Token, secret.Token)
			case "basic":
				p.header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(secret.Username+":"+secret.Password)))
			default:
				p.missing = append(p.missing, name)
			}
		case expect.SchemeAPIKey:
			switch scheme.In {
			case "header":
				p.viaSDK(byHand, name, a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: scheme.Name}, scheme.Name, secret.Key, secret.Key)
			case "query":
				p.query.Set(scheme.Name, secret.Key)
			case "cookie":
				p.cookies = append(p.cookies, &http.Cookie{Name: scheme.Name, Value: secret.Key, Quoted: strings.ContainsAny(secret.Key, " ,")})
			}
		case expect.SchemeOAuth2, expect.SchemeOpenIDConnect:
			tokenURL := scheme.TokenURL
			if scheme.Type == expect.SchemeOpenIDConnect {
				var err error
				if tokenURL, err = s.tokens.discover(ctx, scheme.OpenIDConnectURL); err != nil {
					return nil, &AuthError{Schemes: []string{name}, Err: err}
				}
			}
			key := newTokenKey(card.AgentID, name, tokenURL, secret)
			tok, err := s.tokens.token(ctx, key, tokenURL, secret)
			if err != nil {
				return nil, &AuthError{Schemes: []string{name}, Err: err}
			}
			p.tokens = append(p.tokens, key)
			if scheme.Type == expect.SchemeOAuth2 {
				p.viaSDK(byHand, name, a2a.OAuth2SecurityScheme{Flows: a2a.ClientCredentialsOAuthFlow{TokenURL: tokenURL}}, "Authorization", "Bearer "+tok, tok)
			} else {
				// The SDK's interceptor does not attach OpenID Connect tokens.
				p.header.Set("Authorization", "Bearer "+tok)
			}
		case expect.SchemeMutualTLS:
			p.cert = &secret
			p.certKey = sha256.Sum256([]byte(secret.Certificate + "\x00" + secret.PrivateKey))
		}
	}
	return p, nil
}

// viaSDK hands one scheme's credential to the SDK's AuthInterceptor (1.0
// agents, first such scheme only: the interceptor attaches one), or sets
// the header by hand (0.3 agents, or a second such scheme).
func (p *authPlan) viaSDK(byHand bool, name string, scheme a2a.SecurityScheme, header, value, credential string) {
	if byHand || p.sdkScheme != "" {
		p.header.Set(header, value)
		return
	}
	p.sdkScheme, p.sdkCredential = name, credential
	p.sdkCard = &a2a.AgentCard{
		SecuritySchemes:      a2a.NamedSecuritySchemes{a2a.SecuritySchemeName(name): scheme},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{a2a.SecuritySchemeName(name): a2a.SecuritySchemeScopes{}}},
	}
}

// apply adds the plan's transport-level credentials to a request (already
// cloned by the caller).
func (p *authPlan) apply(r *http.Request) {
	if p == nil {
		return
	}
	for k, vs := range p.header {
		r.Header[k] = vs
	}
	if len(p.query) > 0 {
		q := r.URL.Query()
		for k, vs := range p.query {
			q[k] = vs
		}
		u := *r.URL
		u.RawQuery = q.Encode()
		r.URL = &u
	}
	for _, c := range p.cookies {
		r.AddCookie(c)
	}
}

// credentialsService is the SDK's CredentialsService over the plan of the
// call in the context.
type credentialsService struct{}

// Get implements a2aclient.CredentialsService.
func (credentialsService) Get(ctx context.Context, _ a2aclient.SessionID, scheme a2a.SecuritySchemeName) (a2aclient.AuthCredential, error) {
	st, ok := ctx.Value(callStateKey{}).(*callState)
	if !ok || st.auth == nil || st.auth.sdkScheme != string(scheme) {
		return "", a2aclient.ErrCredentialNotFound
	}
	return a2aclient.AuthCredential(st.auth.sdkCredential), nil
}

// AuthError reports that the agent refused the credentials (HTTP 401 or
// 403), or that credentials could not be obtained (a token endpoint or
// OpenID Connect discovery failed). It names the schemes, never a secret.
type AuthError struct {
	// Schemes are the scheme names of the requirement that was tried;
	// Missing those of them that had no credentials.
	Schemes, Missing []string
	// Unbound are the schemes whose stored credentials were not sent
	// because they were stored for another endpoint or token URL.
	Unbound []string
	// StatusCode is the agent's HTTP status (0 when no request reached it).
	StatusCode int
	// Err is the underlying error.
	Err error
	// TLSRefused is true when the agent's TLS server refused the client
	// certificate (a TLS alert instead of an HTTP status).
	TLSRefused bool

	tokens []tokenKey
}

// Error names the schemes and the status.
func (e *AuthError) Error() string {
	var b strings.Builder
	if e.TLSRefused {
		fmt.Fprintf(&b, "agent refused the client certificate of scheme %s in the TLS handshake: %v", quoteList(e.Schemes), e.Err)
	} else if e.StatusCode != 0 {
		fmt.Fprintf(&b, "agent answered HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
		switch {
		case len(e.Schemes) == 0:
			b.WriteString(": its card declares no security requirement clockwork can meet")
		default:
			fmt.Fprintf(&b, " to the credentials of scheme %s", quoteList(e.Schemes))
		}
	} else {
		fmt.Fprintf(&b, "credentials of scheme %s could not be obtained: %v", quoteList(e.Schemes), e.Err)
	}
	if len(e.Missing) > 0 {
		fmt.Fprintf(&b, " (none configured for %s: PUT /v1/agents/{agentId}/credentials)", quoteList(e.Missing))
	}
	if len(e.Unbound) > 0 {
		fmt.Fprintf(&b, " (those stored for %s were stored for another endpoint or token URL than the card names; PUT them again for this card)", quoteList(e.Unbound))
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *AuthError) Unwrap() error { return e.Err }

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, " and ")
}

// tlsTransports keeps one transport per client certificate, cloned from
// the base transport (so the outbound guard still dials).
type tlsTransports struct {
	base http.RoundTripper
	mu   sync.Mutex
	by   map[[32]byte]http.RoundTripper
}

func (t *tlsTransports) get(p *authPlan) (http.RoundTripper, error) {
	if p == nil || p.cert == nil {
		return t.base, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if rt, ok := t.by[p.certKey]; ok {
		return rt, nil
	}
	cert, err := tls.X509KeyPair([]byte(p.cert.Certificate), []byte(p.cert.PrivateKey))
	if err != nil {
		return nil, errors.New("the stored client certificate and key do not form a pair")
	}
	ht, ok := t.base.(*http.Transport)
	if !ok {
		return nil, errors.New("mutual TLS needs an *http.Transport to add the client certificate to")
	}
	c := ht.Clone()
	if c.TLSClientConfig == nil {
		c.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c.TLSClientConfig.Certificates = []tls.Certificate{cert}
	if len(t.by) > 1000 {
		for _, old := range t.by {
			if ot, ok := old.(*http.Transport); ok {
				ot.CloseIdleConnections()
			}
		}
		clear(t.by)
	}
	t.by[p.certKey] = c
	return c, nil
}

// certificateAlerts are the messages of the TLS alerts a server sends
// when it refuses a client certificate (RFC 8446 section 6.2), as
// crypto/tls renders a received alert ("remote error: tls: ..."; the alert
// type itself is unexported, and the SDK keeps only the message).
var certificateAlerts = []string{"bad certificate", "unsupported certificate", "revoked certificate",
	"expired certificate", "unknown certificate", "unknown certificate authority", "access denied", "certificate required"}

// tlsRefusal reports whether err is a TLS alert refusing the client
// certificate.
func tlsRefusal(err error) bool {
	msg := err.Error()
	i := strings.LastIndex(msg, "remote error: tls: ")
	if i < 0 {
		return false
	}
	rest := msg[i+len("remote error: tls: "):]
	for _, a := range certificateAlerts {
		if strings.HasPrefix(rest, a) {
			return true
		}
	}
	return false
}
