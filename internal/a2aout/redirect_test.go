package a2aout

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/expect"
)

// catcher is a server on another origin that records every request a
// redirect brings it.
type catcher struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string
}

func newCatcher(t *testing.T) *catcher {
	c := &catcher{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c.mu.Lock()
		c.seen = append(c.seen, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Cookie")+" "+string(body))
		c.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *catcher) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// redirector answers every request with a 307 to the same path at target
// (another port on "localhost" rather than 127.0.0.1: another origin, and
// another host too, so Go's own stripping of Authorization is not what
// the test sees).
func redirector(t *testing.T, target string) *httptest.Server {
	u, _ := url.Parse(target)
	u.Host = "localhost:" + u.Port()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, u.String()+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestRedirectCarriesNoCredential: an agent whose endpoint answers a lapse
// task with a 307 to another origin gets no credential there, whichever
// kind its card asks for and in both A2A versions: the redirect is refused
// and the error is permanent (the lapse is dead-lettered with the reason).
func TestRedirectCarriesNoCredential(t *testing.T) {
	for _, version := range []string{"1.0", "0.3"} {
		for _, tc := range authCases() {
			if tc.tls {
				continue // a client certificate is no secret that can leak
			}
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				env := &authEnv{tokens: a2atest.NewTokenServer(t, "clockwork", "cs-right")}
				agent := a2atest.NewAgent(t, version)
				agent.Require(tc.security(t, env))
				card := parseAgentCard(t, agent)
				away := newCatcher(t)
				card.URL = redirector(t, away.URL).URL + "/a2a"
				// The agent's own endpoint redirects: its credentials were stored
				// for it.
				s := authSender((&staticCreds{set: credentials.Set{tc.name: tc.right(env)}}).storedFor(card), (*x509.CertPool)(nil))
				_, err := s.SendLapse(context.Background(), card, testMessage())
				if !errors.Is(err, ErrCrossOriginRedirect) || !Permanent(err) || !strings.Contains(Reason(err), "another origin") {
					t.Fatalf("send: %v (permanent %v, reason %q)", err, Permanent(err), Reason(err))
				}
				if got := away.requests(); len(got) != 0 {
					t.Fatalf("the other origin received %q", got)
				}
			})
		}
	}
}

// TestRedirectWithoutCredentialsFollowed: a card without security schemes
// carries nothing to protect, so its redirects are followed as before.
func TestRedirectWithoutCredentialsFollowed(t *testing.T) {
	agent := a2atest.NewAgent(t, "1.0")
	card := parseAgentCard(t, agent)
	away := newCatcher(t)
	card.URL = redirector(t, away.URL).URL + "/a2a"
	_, err := authSender(&staticCreds{}, nil).SendLapse(context.Background(), card, testMessage())
	if errors.Is(err, ErrCrossOriginRedirect) || len(away.requests()) != 1 {
		t.Fatalf("send: %v; the other origin received %q", err, away.requests())
	}
}

// TestTokenRequestNotRedirected: a token endpoint (OAuth 2.0) or a
// discovery document (OpenID Connect) that redirects elsewhere does not
// take the client secret with it.
func TestTokenRequestNotRedirected(t *testing.T) {
	for _, kind := range []string{"oauth2", "oidc"} {
		t.Run(kind, func(t *testing.T) {
			away := newCatcher(t)
			redirect := redirector(t, away.URL)
			agent := a2atest.NewAgent(t, "1.0")
			if kind == "oauth2" {
				agent.Require(a2atest.OAuth2(kind, redirect.URL+"/token", func(string) bool { return true }))
			} else {
				agent.Require(a2atest.OIDC(kind, redirect.URL+"/.well-known/openid-configuration", func(string) bool { return true }))
			}
			card := parseAgentCard(t, agent)
			s := authSender((&staticCreds{set: credentials.Set{kind: {ClientID: "clockwork", ClientSecret: "cs-secret"}}}).storedFor(card), nil)
			_, err := s.SendLapse(context.Background(), card, testMessage())
			if !errors.Is(err, ErrCrossOriginRedirect) || !Permanent(err) {
				t.Fatalf("send: %v", err)
			}
			for _, r := range away.requests() {
				if strings.Contains(r, "cs-secret") || strings.Contains(r, "Basic") {
					t.Fatalf("the other origin received the client secret: %q", r)
				}
			}
			if len(away.requests()) != 0 {
				t.Fatalf("the other origin received %q", away.requests())
			}
		})
	}
}

func TestOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://Agent.example/a2a":     "https://agent.example:443",
		"https://agent.example:443/x":   "https://agent.example:443",
		"http://agent.example/":         "http://agent.example:80",
		"http://127.0.0.1:8080/a2a":     "http://127.0.0.1:8080",
		"https://[::1]:9443/a2a?x=1":    "https://[::1]:9443",
		"not a url":                     "",
		"https://agent.example:8443/v1": "https://agent.example:8443",
	} {
		if got := expect.OriginOf(in); got != want {
			t.Errorf("OriginOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRepointedCardGetsNoStoredSecret: credentials stored for a card are
// not sent once the card names another endpoint origin, or another token
// or discovery URL, whatever kind they are: the send fails permanently
// saying why, and the new host receives no secret.
func TestRepointedCardGetsNoStoredSecret(t *testing.T) {
	for _, tc := range authCases() {
		if tc.tls {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			env := &authEnv{tokens: a2atest.NewTokenServer(t, "clockwork", "cs-right")}
			agent := a2atest.NewAgent(t, "1.0")
			agent.Require(tc.security(t, env))
			card := parseAgentCard(t, agent)
			creds := (&staticCreds{set: credentials.Set{tc.name: tc.right(env)}}).storedFor(card)
			s := authSender(creds, nil)
			if _, err := s.SendLapse(context.Background(), card, testMessage()); err != nil {
				t.Fatalf("to the card they were stored for: %v", err)
			}
			away := newCatcher(t)
			moved := card
			moved.URL = away.URL + "/a2a"
			_, err := s.SendLapse(context.Background(), moved, testMessage())
			var ae *AuthError
			if !errors.As(err, &ae) || len(ae.Unbound) != 1 || !Permanent(err) || !strings.Contains(err.Error(), "another endpoint") {
				t.Fatalf("to a re-pointed card: %v", err)
			}
			for _, r := range away.requests() {
				for _, secret := range []string{"tok-right", "pw-right", "key-right", "Bearer", "Basic"} {
					if strings.Contains(r, secret) {
						t.Fatalf("the new endpoint received a stored secret: %q", r)
					}
				}
			}
		})
	}
	// A token URL moved elsewhere gets no client secret either.
	env := &authEnv{tokens: a2atest.NewTokenServer(t, "clockwork", "cs-right")}
	agent := a2atest.NewAgent(t, "1.0")
	agent.Require(a2atest.OAuth2("oauth2", env.tokens.TokenURL(), env.tokens.Valid))
	card := parseAgentCard(t, agent)
	creds := (&staticCreds{set: credentials.Set{"oauth2": {ClientID: "clockwork", ClientSecret: "cs-right"}}}).storedFor(card)
	away := newCatcher(t)
	moved := card
	moved.SecuritySchemes = maps.Clone(card.SecuritySchemes)
	sc := moved.SecuritySchemes["oauth2"]
	sc.TokenURL = away.URL + "/token"
	moved.SecuritySchemes["oauth2"] = sc
	if _, err := authSender(creds, nil).SendLapse(context.Background(), moved, testMessage()); err == nil {
		t.Fatal("sent with a moved token URL")
	}
	if len(away.requests()) != 0 {
		t.Fatalf("the moved token URL received %q", away.requests())
	}
}

// TestTokenFailureStoresOnlyItsClass: a discovery or token request that
// fails at the socket is reported by the class of failure, not by the
// dial error's text (the address, the system call), which stored on a
// record would tell a tenant more than whether anything answered.
func TestTokenFailureStoresOnlyItsClass(t *testing.T) {
	closed := httptest.NewServer(http.NotFoundHandler())
	addr := closed.URL
	closed.Close()
	agent := a2atest.NewAgent(t, "1.0")
	agent.Require(a2atest.OIDC("oidc", addr+"/.well-known/openid-configuration", func(string) bool { return true }))
	card := parseAgentCard(t, agent)
	s := authSender((&staticCreds{set: credentials.Set{"oidc": {ClientID: "clockwork", ClientSecret: "cs"}}}).storedFor(card), nil)
	_, err := s.SendLapse(context.Background(), card, testMessage())
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("send: %v", err)
	}
	for _, leak := range []string{"dial", strings.TrimPrefix(addr, "http://")} {
		if strings.Contains(err.Error(), leak) {
			t.Fatalf("the error tells %q: %v", leak, err)
		}
	}
}

// TestDiscoveryCannotMoveTheSecret: an OpenID Connect discovery document
// (whoever serves it) that names a token endpoint on another origin, here
// plain http elsewhere, does not get the client secret sent there: the
// secret was stored for the discovery URL's origin.
func TestDiscoveryCannotMoveTheSecret(t *testing.T) {
	away := newCatcher(t)
	steal := strings.Replace(away.URL, "127.0.0.1", "localhost", 1) + "/steal"
	disco := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": "https://issuer.example", "token_endpoint": steal})
	}))
	defer disco.Close()
	agent := a2atest.NewAgent(t, "1.0")
	agent.Require(a2atest.OIDC("oidc", disco.URL+"/.well-known/openid-configuration", func(string) bool { return true }))
	card := parseAgentCard(t, agent)
	s := authSender((&staticCreds{set: credentials.Set{"oidc": {ClientID: "clockwork", ClientSecret: "cs-secret"}}}).storedFor(card), nil)
	_, err := s.SendLapse(context.Background(), card, testMessage())
	if err == nil || !Permanent(err) || !strings.Contains(Reason(err), "another origin") {
		t.Fatalf("send: %v (reason %q)", err, Reason(err))
	}
	if got := away.requests(); len(got) != 0 {
		t.Fatalf("the token endpoint the document named received %q", got)
	}
}

// TestAPIKeyBoundToWhereItGoes: a card re-PUT that moves an API key from a
// header to the query string (where access logs and Referer headers keep
// it), on the same origin, does not get the stored key.
func TestAPIKeyBoundToWhereItGoes(t *testing.T) {
	agent := a2atest.NewAgent(t, "1.0")
	agent.Require(a2atest.APIKey("key", "header", "X-Api-Key", "key-right"))
	card := parseAgentCard(t, agent)
	creds := (&staticCreds{set: credentials.Set{"key": {Key: "key-right"}}}).storedFor(card)
	moved := card
	moved.SecuritySchemes = maps.Clone(card.SecuritySchemes)
	sc := moved.SecuritySchemes["key"]
	sc.In, sc.Name = "query", "leaked"
	moved.SecuritySchemes["key"] = sc
	_, err := authSender(creds, nil).SendLapse(context.Background(), moved, testMessage())
	var ae *AuthError
	if !errors.As(err, &ae) || len(ae.Unbound) != 1 {
		t.Fatalf("send with the key moved to the query: %v", err)
	}
	for _, r := range agent.Received() {
		t.Fatalf("the agent received %+v", r)
	}
}

// TestReasonOfARefusedTokenRequest: the record of a lapse whose token
// endpoint refused the client says so, by status.
func TestReasonOfARefusedTokenRequest(t *testing.T) {
	tokens := a2atest.NewTokenServer(t, "clockwork", "cs")
	agent := a2atest.NewAgent(t, "1.0")
	agent.Require(a2atest.OIDC("oidc", tokens.DiscoveryURL(), tokens.Valid))
	card := parseAgentCard(t, agent)
	s := authSender((&staticCreds{set: credentials.Set{"oidc": {ClientID: "clockwork", ClientSecret: "wrong"}}}).storedFor(card), nil)
	_, err := s.SendLapse(context.Background(), card, testMessage())
	if got := Reason(err); !strings.Contains(got, "token endpoint") || !strings.Contains(got, "401") || strings.Contains(got, "wrong") {
		t.Fatalf("reason %q for %v", got, err)
	}
}
