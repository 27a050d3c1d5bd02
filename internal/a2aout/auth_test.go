package a2aout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout/a2atest"
	"github.com/agentclock/clockwork/internal/credentials"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/netguard"
)

// staticCreds is a CredentialSource over one Set, replaceable (rotation),
// stored for the card given to storedFor as the credentials service stores
// them (each secret bound to the card's CredentialBinding at the time).
type staticCreds struct {
	mu   sync.Mutex
	set  credentials.Set
	card *expect.Card
}

// storedFor binds the secrets to card as a PUT of credentials does.
func (s *staticCreds) storedFor(card expect.Card) *staticCreds {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.card = &card
	return s
}

func (s *staticCreds) Load(context.Context, string) (credentials.Set, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := credentials.Set{}
	for name, secret := range s.set {
		if s.card != nil {
			secret.Bound = s.card.CredentialBinding(name)
		}
		out[name] = secret
	}
	return out, nil
}

func (s *staticCreds) put(set credentials.Set) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set = set
}

// authSender is a sender to loopback agents trusting roots (for TLS agents).
func authSender(creds CredentialSource, roots *x509.CertPool) *Sender {
	client := netguard.NewHTTPClient(netguard.Guard{AllowPrivate: true}, 0)
	if roots != nil {
		client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	}
	return NewSender(Options{HTTPClient: client, Timeout: 10 * time.Second, Credentials: creds})
}

// authCase is one kind of credential: the agent's requirement, the right
// secret and a wrong one.
type authCase struct {
	name        string
	tls         bool
	security    func(t *testing.T, env *authEnv) a2atest.Security
	right, bad  func(env *authEnv) credentials.Secret
	viaSDKOn1_0 bool
}

type authEnv struct {
	tokens *a2atest.TokenServer
	ca     *a2atest.TestCA
	cert   [2]string
	other  [2]string
}

func authCases() []authCase {
	return []authCase{
		{name: "bearer", viaSDKOn1_0: true,
			security: func(t *testing.T, _ *authEnv) a2atest.Security {
				return a2atest.Bearer("bearer", func(tok string) bool { return tok == "tok-right" })
			},
			right: func(*authEnv) credentials.Secret { return credentials.Secret{Token: "tok-right"} },
			bad:   func(*authEnv) credentials.Secret { return credentials.Secret{Token: "tok-wrong"} }},
		{name: "basic",
			security: func(t *testing.T, _ *authEnv) a2atest.Security { return a2atest.Basic("basic", "clock", "pw-right") },
			right:    func(*authEnv) credentials.Secret { return credentials.Secret{Username: "clock", Password: "pw-right"} },
			bad:      func(*authEnv) credentials.Secret { return credentials.Secret{Username: "clock", Password: "pw-wrong"} }},
		{name: "apikey-header", viaSDKOn1_0: true,
			security: func(t *testing.T, _ *authEnv) a2atest.Security {
				return a2atest.APIKey("apikey-header", "header", "X-Api-Key", "key-right")
			},
			right: func(*authEnv) credentials.Secret { return credentials.Secret{Key: "key-right"} },
			bad:   func(*authEnv) credentials.Secret { return credentials.Secret{Key: "key-wrong"} }},
		{name: "apikey-query",
			security: func(t *testing.T, _ *authEnv) a2atest.Security {
				return a2atest.APIKey("apikey-query", "query", "api_key", "key-right")
			},
			right: func(*authEnv) credentials.Secret { return credentials.Secret{Key: "key-right"} },
			bad:   func(*authEnv) credentials.Secret { return credentials.Secret{Key: "key-wrong"} }},
		{name: "apikey-cookie",
			security: func(t *testing.T, _ *authEnv) a2atest.Security {
				return a2atest.APIKey("apikey-cookie", "cookie", "session", "key-right")
			},
			right: func(*authEnv) credentials.Secret { return credentials.Secret{Key: "key-right"} },
			bad:   func(*authEnv) credentials.Secret { return credentials.Secret{Key: "key-wrong"} }},
		{name: "oauth2", viaSDKOn1_0: true,
			security: func(t *testing.T, env *authEnv) a2atest.Security {
				return a2atest.OAuth2("oauth2", env.tokens.TokenURL(), env.tokens.Valid)
			},
			right: func(*authEnv) credentials.Secret {
				return credentials.Secret{ClientID: "clockwork", ClientSecret: "cs-right", Scopes: []string{"lapses"}}
			},
			bad: func(*authEnv) credentials.Secret {
				return credentials.Secret{ClientID: "clockwork", ClientSecret: "cs-wrong"}
			}},
		{name: "oidc",
			security: func(t *testing.T, env *authEnv) a2atest.Security {
				return a2atest.OIDC("oidc", env.tokens.DiscoveryURL(), env.tokens.Valid)
			},
			right: func(*authEnv) credentials.Secret {
				return credentials.Secret{ClientID: "clockwork", ClientSecret: "cs-right"}
			},
			bad: func(*authEnv) credentials.Secret {
				return credentials.Secret{ClientID: "clockwork", ClientSecret: "cs-wrong"}
			}},
		{name: "mtls", tls: true,
			security: func(t *testing.T, _ *authEnv) a2atest.Security { return a2atest.MutualTLS("mtls") },
			right: func(env *authEnv) credentials.Secret {
				return credentials.Secret{Certificate: env.cert[0], PrivateKey: env.cert[1]}
			},
			bad: func(env *authEnv) credentials.Secret {
				return credentials.Secret{Certificate: env.other[0], PrivateKey: env.other[1]}
			}},
	}
}

// TestSendWithCredentials delivers to an SDK agent requiring each kind of
// credential, in both A2A versions: the right secret is accepted (the SDK
// server's call context carries the authenticated user), a wrong or
// missing one is refused with an *AuthError naming the scheme and the
// status, which Permanent reports as permanent; the extension's activation
// is reported.
func TestSendWithCredentials(t *testing.T) {
	for _, version := range []string{"1.0", "0.3"} {
		for _, tc := range authCases() {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				env := &authEnv{tokens: a2atest.NewTokenServer(t, "clockwork", "cs-right"), ca: a2atest.NewTestCA(t)}
				env.cert[0], env.cert[1] = env.ca.ClientCert(t, "clockwork")
				otherCA := a2atest.NewTestCA(t)
				env.other[0], env.other[1] = otherCA.ClientCert(t, "intruder")
				var agent *a2atest.Agent
				var roots *x509.CertPool
				if tc.tls {
					agent = a2atest.NewTLSAgent(t, version, env.ca.Pool)
					roots = x509.NewCertPool()
					roots.AddCert(agent.ServerCertificate())
				} else {
					agent = a2atest.NewAgent(t, version)
				}
				agent.Require(tc.security(t, env))
				card := parseAgentCard(t, agent)
				if len(card.Security) != 1 || card.SecuritySchemes[tc.name].Type == "" {
					t.Fatalf("card security = %+v %+v", card.SecuritySchemes, card.Security)
				}
				creds := (&staticCreds{}).storedFor(card)
				s := authSender(creds, roots)

				// Missing credentials: refused, the error says none are configured.
				_, err := s.SendLapse(context.Background(), card, testMessage())
				var ae *AuthError
				if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized || !Permanent(err) {
					t.Fatalf("without credentials: %v", err)
				}
				if !strings.Contains(err.Error(), `scheme "`+tc.name+`"`) || !strings.Contains(err.Error(), "401") || len(ae.Missing) != 1 {
					t.Fatalf("error does not name the scheme, the status and what is missing: %v", err)
				}

				// Wrong credentials.
				creds.put(credentials.Set{tc.name: tc.bad(env)})
				_, err = s.SendLapse(context.Background(), card, testMessage())
				if !errors.As(err, &ae) || !Permanent(err) || !strings.Contains(err.Error(), `scheme "`+tc.name+`"`) {
					t.Fatalf("with wrong credentials: %v", err)
				}
				if strings.Contains(err.Error(), "wrong") {
					t.Fatalf("the error shows a secret: %v", err)
				}

				// The right ones (rotation: the next Send uses them).
				creds.put(credentials.Set{tc.name: tc.right(env)})
				out, err := s.SendLapse(context.Background(), card, testMessage())
				if err != nil {
					t.Fatalf("with the right credentials: %v", err)
				}
				got := agent.WaitFor(1, 5*time.Second)
				if len(got) != 1 || got[0].User != tc.name || got[0].MessageID != testMessage().MessageID {
					t.Fatalf("agent received %+v", got)
				}
				if out.TaskID == "" || out.TaskID != got[0].TaskID || !out.Activated {
					t.Fatalf("outcome %+v", out)
				}
			})
		}
	}
}

// TestOAuth2TokenCache: a cached token is reused; one that expires within
// TokenExpiryMargin is fetched again; a revoked one gets one fresh fetch
// and the lapse goes through; an agent that refuses every token gets
// exactly one fresh fetch and then an AuthError.
func TestOAuth2TokenCache(t *testing.T) {
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			tokens := a2atest.NewTokenServer(t, "clockwork", "cs")
			agent := a2atest.NewAgent(t, version)
			refuseAll := false
			var mu sync.Mutex
			agent.Require(a2atest.OAuth2("oauth", tokens.TokenURL(), func(tok string) bool {
				mu.Lock()
				defer mu.Unlock()
				return !refuseAll && tokens.Valid(tok)
			}))
			card := parseAgentCard(t, agent)
			s := authSender((&staticCreds{set: credentials.Set{"oauth": {ClientID: "clockwork", ClientSecret: "cs", Scopes: []string{"lapses"}}}}).storedFor(card), nil)
			send := func() error { _, err := s.SendLapse(context.Background(), card, testMessage()); return err }

			for i := 0; i < 3; i++ {
				if err := send(); err != nil {
					t.Fatal(err)
				}
			}
			if n := tokens.Issued(); n != 1 {
				t.Fatalf("3 sends fetched %d tokens, want 1 (cached)", n)
			}
			if sc := tokens.Scopes(); len(sc) != 1 || sc[0] != "lapses" {
				t.Fatalf("scopes asked %v", sc)
			}

			tokens.RevokeAll()
			if err := send(); err != nil {
				t.Fatalf("after revocation: %v", err)
			}
			if n := tokens.Issued(); n != 2 {
				t.Fatalf("revoked token: %d tokens issued, want 2 (one fresh fetch)", n)
			}

			tokens.SetExpiresIn(TokenExpiryMargin / 2) // expires "shortly": refreshed every time
			tokens.RevokeAll()
			_ = send() // one 401, one fresh fetch
			before := tokens.Issued()
			if err := send(); err != nil {
				t.Fatal(err)
			}
			if n := tokens.Issued(); n != before+1 {
				t.Fatalf("a token expiring within the margin was reused (%d -> %d)", before, n)
			}

			tokens.SetExpiresIn(time.Hour)
			if err := send(); err != nil { // caches a long-lived token
				t.Fatal(err)
			}
			mu.Lock()
			refuseAll = true
			mu.Unlock()
			before = tokens.Issued()
			refusedBefore := agent.Refused()
			err := send()
			var ae *AuthError
			if !errors.As(err, &ae) || ae.StatusCode != 401 || !Permanent(err) || !strings.Contains(err.Error(), `scheme "oauth"`) {
				t.Fatalf("agent refusing every token: %v", err)
			}
			if n := tokens.Issued() - before; n > 1 {
				t.Fatalf("%d fresh fetches, want at most one", n)
			}
			if n := agent.Refused() - refusedBefore; n != 2 {
				t.Fatalf("the agent saw %d refused requests, want 2 (cached, then fresh)", n)
			}
		})
	}
}

// TestTokenEndpointRefusal: client credentials the token endpoint refuses
// are a permanent error naming the scheme and the endpoint's status, not
// its body; a token endpoint on a refused address never gets a request.
func TestTokenEndpointRefusal(t *testing.T) {
	tokens := a2atest.NewTokenServer(t, "clockwork", "cs")
	agent := a2atest.NewAgent(t, "1.0")
	agent.Require(a2atest.OAuth2("oauth", tokens.TokenURL(), tokens.Valid))
	card := parseAgentCard(t, agent)
	s := authSender((&staticCreds{set: credentials.Set{"oauth": {ClientID: "clockwork", ClientSecret: "nope-secret"}}}).storedFor(card), nil)
	_, err := s.SendLapse(context.Background(), card, testMessage())
	var ee *EndpointError
	if !errors.As(err, &ee) || ee.StatusCode != 401 || !Permanent(err) || !strings.Contains(err.Error(), `"oauth"`) {
		t.Fatalf("refused client: %v", err)
	}
	if strings.Contains(err.Error(), "nope-secret") || strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("error shows the secret or the endpoint's body: %v", err)
	}

	// The guard: a sender that may not reach loopback does not fetch the token.
	guarded := NewSender(Options{Credentials: (&staticCreds{set: credentials.Set{"oauth": {ClientID: "clockwork", ClientSecret: "cs"}}}).storedFor(card)})
	if _, err := guarded.SendLapse(context.Background(), card, testMessage()); !errors.Is(err, netguard.ErrRefused) || !Permanent(err) {
		t.Fatalf("token endpoint on loopback through the guard: %v", err)
	}
	if tokens.Issued() != 0 {
		t.Fatal("the guard let a token request through")
	}
	// Same for OpenID Connect discovery.
	agent2 := a2atest.NewAgent(t, "1.0")
	agent2.Require(a2atest.OIDC("oidc", tokens.DiscoveryURL(), tokens.Valid))
	card2 := parseAgentCard(t, agent2)
	guarded = NewSender(Options{Credentials: (&staticCreds{set: credentials.Set{"oidc": {ClientID: "clockwork", ClientSecret: "cs"}}}).storedFor(card2)})
	if _, err := guarded.SendLapse(context.Background(), card2, testMessage()); !errors.Is(err, netguard.ErrRefused) {
		t.Fatalf("discovery on loopback through the guard: %v", err)
	}
}

// TestActivatedOnlyWhenEchoed: an agent that answers without echoing the
// extension in A2A-Extensions is reported as not having activated it.
func TestActivatedOnlyWhenEchoed(t *testing.T) {
	card := rawAgent(t, `{"jsonrpc":"2.0","id":"1","result":{"message":{"messageId":"m","role":"ROLE_AGENT","taskId":"t","parts":[{"text":"ok"}]}}}`)
	out, err := localSender(time.Second).SendLapse(context.Background(), card, testMessage())
	if err != nil || out.TaskID != "t" || out.Activated {
		t.Fatalf("SendLapse = %+v, %v; want delivered, not activated", out, err)
	}
	for _, version := range []string{"1.0", "0.3"} {
		agent := a2atest.NewAgent(t, version)
		out, err := localSender(5*time.Second).SendLapse(context.Background(), parseAgentCard(t, agent), testMessage())
		if err != nil || !out.Activated {
			t.Fatalf("%s agent that echoes: %+v, %v", version, out, err)
		}
	}
	header := func(k, v string) http.Header { h := http.Header{}; h.Set(k, v); return h }
	for _, h := range []http.Header{header("A2A-Extensions", "https://other/x, "+expect.URI), header("X-A2A-Extensions", expect.URI)} {
		if !echoes(h) {
			t.Errorf("echoes(%v) = false", h)
		}
	}
	if echoes(header("A2A-Extensions", expect.URI+"/v2")) {
		t.Error("a longer URI counts as an echo")
	}
}
