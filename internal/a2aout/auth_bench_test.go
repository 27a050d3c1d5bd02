package a2aout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/netguard"
)

// planOnly switches BenchmarkSendWithCredentials to BenchmarkCredentialPlan.
var planOnly bool

// BenchmarkCredentialPlan measures only what credentials add to one
// delivery: loading the Set, choosing the requirement, building what is
// attached (a token from the cache, or fetched from the local token
// endpoint when uncached) and applying it to the request; the agent's own
// work is not in it.
//
//	go test -run '^$' -bench CredentialPlan ./internal/a2aout
func BenchmarkCredentialPlan(b *testing.B) {
	planOnly = true
	defer func() { planOnly = false }()
	BenchmarkSendWithCredentials(b)
}

func benchPlan(b *testing.B, useTLS bool, security []a2atest.Security, set credentials.Set, uncached bool, ca *a2atest.TestCA) {
	var agent *a2atest.Agent
	if useTLS {
		agent = a2atest.NewTLSAgent(b, "1.0", ca.Pool)
	} else {
		agent = a2atest.NewAgent(b, "1.0")
	}
	agent.Require(security...)
	card := parseAgentCard(&testing.T{}, agent)
	s := NewSender(Options{HTTPClient: netguard.NewHTTPClient(netguard.Guard{AllowPrivate: true}, 0), Credentials: (&staticCreds{set: set}).storedFor(card)})
	ctx := context.Background()
	req, _ := http.NewRequest(http.MethodPost, card.URL, nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if uncached {
			s.tokens.mu.Lock()
			clear(s.tokens.tokens)
			clear(s.tokens.oidc)
			s.tokens.mu.Unlock()
		}
		p, err := s.plan(ctx, card)
		if err != nil {
			b.Fatal(err)
		}
		r := req.Clone(ctx)
		p.apply(r)
		if _, err := s.http.Transport.(*recordingTransport).base.get(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSendWithCredentials measures one delivery to a loopback SDK
// agent (1.0) per kind of credential; the added latency of a scheme is its
// ns/op minus that of "none". "uncached" drops the OAuth 2.0 token (and
// the OpenID Connect discovery document) before every send, so each
// delivery fetches a token from the local token endpoint.
//
//	go test -run '^$' -bench SendWithCredentials -benchtime 300x ./internal/a2aout
func BenchmarkSendWithCredentials(b *testing.B) {
	tokens := a2atest.NewTokenServer(b, "clockwork", "cs")
	ca := a2atest.NewTestCA(b)
	certPEM, keyPEM := ca.ClientCert(b, "clockwork")
	cases := []struct {
		name     string
		tls      bool
		security []a2atest.Security
		set      credentials.Set
		uncached bool
	}{
		{name: "none"},
		{name: "bearer", security: []a2atest.Security{a2atest.Bearer("s", func(t string) bool { return t == "tok" })}, set: credentials.Set{"s": {Token: "tok"}}},
		{name: "basic", security: []a2atest.Security{a2atest.Basic("s", "u", "p")}, set: credentials.Set{"s": {Username: "u", Password: "p"}}},
		{name: "apikey-header", security: []a2atest.Security{a2atest.APIKey("s", "header", "X-Key", "k")}, set: credentials.Set{"s": {Key: "k"}}},
		{name: "apikey-query", security: []a2atest.Security{a2atest.APIKey("s", "query", "key", "k")}, set: credentials.Set{"s": {Key: "k"}}},
		{name: "apikey-cookie", security: []a2atest.Security{a2atest.APIKey("s", "cookie", "key", "k")}, set: credentials.Set{"s": {Key: "k"}}},
		{name: "oauth2-cached", security: []a2atest.Security{a2atest.OAuth2("s", tokens.TokenURL(), tokens.Valid)}, set: credentials.Set{"s": {ClientID: "clockwork", ClientSecret: "cs"}}},
		{name: "oauth2-uncached", security: []a2atest.Security{a2atest.OAuth2("s", tokens.TokenURL(), tokens.Valid)}, set: credentials.Set{"s": {ClientID: "clockwork", ClientSecret: "cs"}}, uncached: true},
		{name: "oidc-cached", security: []a2atest.Security{a2atest.OIDC("s", tokens.DiscoveryURL(), tokens.Valid)}, set: credentials.Set{"s": {ClientID: "clockwork", ClientSecret: "cs"}}},
		{name: "oidc-uncached", security: []a2atest.Security{a2atest.OIDC("s", tokens.DiscoveryURL(), tokens.Valid)}, set: credentials.Set{"s": {ClientID: "clockwork", ClientSecret: "cs"}}, uncached: true},
		{name: "tls-none", tls: true},
		{name: "tls-mtls", tls: true, security: []a2atest.Security{a2atest.MutualTLS("s")}, set: credentials.Set{"s": {Certificate: certPEM, PrivateKey: keyPEM}}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			if planOnly {
				benchPlan(b, tc.tls, tc.security, tc.set, tc.uncached, ca)
				return
			}
			var agent *a2atest.Agent
			client := netguard.NewHTTPClient(netguard.Guard{AllowPrivate: true}, 0)
			if tc.tls {
				agent = a2atest.NewTLSAgent(b, "1.0", ca.Pool)
				roots := x509.NewCertPool()
				roots.AddCert(agent.ServerCertificate())
				client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			} else {
				agent = a2atest.NewAgent(b, "1.0")
			}
			agent.Require(tc.security...)
			card := parseAgentCard(&testing.T{}, agent)
			s := NewSender(Options{HTTPClient: client, Credentials: (&staticCreds{set: tc.set}).storedFor(card)})
			ctx := context.Background()
			if _, err := s.SendLapse(ctx, card, testMessage()); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if tc.uncached {
					s.tokens.mu.Lock()
					clear(s.tokens.tokens)
					clear(s.tokens.oidc)
					s.tokens.mu.Unlock()
				}
				if _, err := s.SendLapse(ctx, card, testMessage()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
