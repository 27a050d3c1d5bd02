package a2aout

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/credentials"
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
				s := authSender(&staticCreds{set: credentials.Set{tc.name: tc.right(env)}}, (*x509.CertPool)(nil))
				_, err := s.SendLapse(context.Background(), card, testMessage())
				if !errors.Is(err, ErrCrossOriginRedirect) || !Permanent(err) {
					t.Fatalf("send: %v (permanent %v)", err, Permanent(err))
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
			s := authSender(&staticCreds{set: credentials.Set{kind: {ClientID: "clockwork", ClientSecret: "cs-secret"}}}, nil)
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
		if got := OriginOf(in); got != want {
			t.Errorf("OriginOf(%q) = %q, want %q", in, got, want)
		}
	}
}
