package a2atest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Security is one security scheme a test agent requires: how its card
// declares it in each version, and how a request is checked.
type Security struct {
	// Name is the scheme name on the card.
	Name string
	// V1 and V03 are the scheme objects of a 1.0 and a 0.3 card.
	V1, V03 map[string]any
	// Check reports whether the request carries valid credentials.
	Check func(r *http.Request) bool
}

// Bearer requires "Authorization: Bearer <token>" where valid(token).
func Bearer(name string, valid func(token string) bool) Security {
	return Security{Name: name,
		V1:  map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer"}},
		V03: map[string]any{"type": "http", "scheme": "bearer"},
		Check: func(r *http.Request) bool {
			tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			return ok && valid(tok)
		}}
}

// Basic requires HTTP Basic with username and password.
func Basic(name, username, password string) Security {
	return Security{Name: name,
		V1:  map[string]any{"httpAuthSecurityScheme": map[string]any{"scheme": "Basic"}},
		V03: map[string]any{"type": "http", "scheme": "basic"},
		Check: func(r *http.Request) bool {
			u, p, ok := r.BasicAuth()
			return ok && u == username && p == password
		}}
}

// APIKey requires key in the header, query parameter or cookie named param.
func APIKey(name, in, param, key string) Security {
	return Security{Name: name,
		V1:  map[string]any{"apiKeySecurityScheme": map[string]any{"location": in, "name": param}},
		V03: map[string]any{"type": "apiKey", "in": in, "name": param},
		Check: func(r *http.Request) bool {
			switch in {
			case "header":
				return r.Header.Get(param) == key
			case "query":
				return r.URL.Query().Get(param) == key
			case "cookie":
				c, err := r.Cookie(param)
				return err == nil && c.Value == key
			}
			return false
		}}
}

// OAuth2 requires a bearer token that valid accepts, declaring a
// clientCredentials flow at tokenURL.
func OAuth2(name, tokenURL string, valid func(token string) bool) Security {
	flows := map[string]any{"clientCredentials": map[string]any{"tokenUrl": tokenURL, "scopes": map[string]any{"lapses": "receive lapse tasks"}}}
	s := Bearer(name, valid)
	s.V1 = map[string]any{"oauth2SecurityScheme": map[string]any{"flows": flows}}
	s.V03 = map[string]any{"type": "oauth2", "flows": flows}
	return s
}

// OIDC requires a bearer token that valid accepts, declaring OpenID Connect
// discovery at discoveryURL.
func OIDC(name, discoveryURL string, valid func(token string) bool) Security {
	s := Bearer(name, valid)
	s.V1 = map[string]any{"openIdConnectSecurityScheme": map[string]any{"openIdConnectUrl": discoveryURL}}
	s.V03 = map[string]any{"type": "openIdConnect", "openIdConnectUrl": discoveryURL}
	return s
}

// MutualTLS requires a client certificate verified by the agent's TLS
// server (see NewTLSAgent).
func MutualTLS(name string) Security {
	return Security{Name: name,
		V1:  map[string]any{"mtlsSecurityScheme": map[string]any{}},
		V03: map[string]any{"type": "mutualTLS"},
		Check: func(r *http.Request) bool {
			return r.TLS != nil && len(r.TLS.VerifiedChains) > 0
		}}
}

// Require makes the agent's card declare the schemes as one security
// requirement, and the agent answer HTTP 401 to any JSON-RPC request that
// does not satisfy every one of them.
func (a *Agent) Require(s ...Security) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.security = append([]Security(nil), s...)
}

// withSecurity adds the required schemes to a card.
func (a *Agent) withSecurity(card []byte) []byte {
	a.mu.Lock()
	sec := a.security
	a.mu.Unlock()
	if len(sec) == 0 || card == nil {
		return card
	}
	var m map[string]any
	if err := json.Unmarshal(card, &m); err != nil {
		a.t.Errorf("a2atest: card: %v", err)
		return nil
	}
	schemes, req := map[string]any{}, map[string]any{}
	for _, s := range sec {
		if a.version == "0.3" {
			schemes[s.Name] = s.V03
		} else {
			schemes[s.Name] = s.V1
		}
		req[s.Name] = []any{}
	}
	m["securitySchemes"] = schemes
	if a.version == "0.3" {
		m["security"] = []any{req}
	} else {
		m["securityRequirements"] = []any{map[string]any{"schemes": req}}
	}
	b, _ := json.Marshal(m)
	return b
}

// authenticatedKey marks a request the HTTP layer authenticated, for the
// SDK interceptor.
type authenticatedKey struct{}

// authenticate answers 401 (with WWW-Authenticate) when the request does
// not satisfy the agent's requirement, as an agent behind a gateway does.
func (a *Agent) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		sec := a.security
		a.mu.Unlock()
		if len(sec) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		var names []string
		for _, s := range sec {
			if !s.Check(r) {
				a.mu.Lock()
				a.refused++
				a.mu.Unlock()
				w.Header().Set("WWW-Authenticate", `Bearer realm="a2atest"`)
				http.Error(w, "a2atest: unauthenticated", http.StatusUnauthorized)
				return
			}
			names = append(names, s.Name)
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, strings.Join(names, "+"))))
	})
}

// Refused returns how many JSON-RPC requests the agent refused with 401.
func (a *Agent) Refused() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

// authInterceptor is the SDK server's authentication middleware: it puts
// the user the HTTP layer authenticated into the call context, and refuses
// a call that reached the handler unauthenticated.
type authInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	agent *Agent
}

// Before implements a2asrv.CallInterceptor.
func (i authInterceptor) Before(ctx context.Context, callCtx *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	i.agent.mu.Lock()
	required := len(i.agent.security) > 0
	i.agent.mu.Unlock()
	name, ok := ctx.Value(authenticatedKey{}).(string)
	if !ok {
		if required {
			return ctx, nil, a2a.ErrUnauthenticated
		}
		return ctx, nil, nil
	}
	callCtx.User = a2asrv.NewAuthenticatedUser(name, nil)
	return ctx, nil, nil
}

// TokenServer is a local OAuth 2.0 token endpoint (client credentials
// grant, RFC 6749 section 4.4) that also serves an OpenID Connect
// discovery document. It counts the tokens it issues and can revoke them.
type TokenServer struct {
	srv          *httptest.Server
	clientID     string
	clientSecret string
	// ExpiresIn is the lifetime it gives tokens (seconds).
	expiresIn atomic.Int64

	mu     sync.Mutex
	issued int
	valid  map[string]time.Time
	scopes []string
}

// NewTokenServer starts a token endpoint for one client on 127.0.0.1.
func NewTokenServer(t testing.TB, clientID, clientSecret string) *TokenServer {
	ts := &TokenServer{clientID: clientID, clientSecret: clientSecret, valid: map[string]time.Time{}}
	ts.expiresIn.Store(3600)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", ts.token)
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": ts.srv.URL, "token_endpoint": ts.TokenURL(),
			"grant_types_supported": []string{"client_credentials"}})
	})
	ts.srv = httptest.NewServer(mux)
	t.Cleanup(ts.srv.Close)
	return ts
}

// TokenURL is the token endpoint; DiscoveryURL the OpenID Connect
// discovery document naming it.
func (ts *TokenServer) TokenURL() string     { return ts.srv.URL + "/token" }
func (ts *TokenServer) DiscoveryURL() string { return ts.srv.URL + "/.well-known/openid-configuration" }

// SetExpiresIn sets the lifetime of tokens issued from now on.
func (ts *TokenServer) SetExpiresIn(d time.Duration) { ts.expiresIn.Store(int64(d / time.Second)) }

// Issued returns how many tokens were issued.
func (ts *TokenServer) Issued() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.issued
}

// Scopes returns the scopes of the last token request.
func (ts *TokenServer) Scopes() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.scopes
}

// Valid reports whether token was issued here, is unexpired and not
// revoked (the agent's check).
func (ts *TokenServer) Valid(token string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	exp, ok := ts.valid[token]
	return ok && time.Now().Before(exp)
}

// RevokeAll revokes every token issued so far.
func (ts *TokenServer) RevokeAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	clear(ts.valid)
}

func (ts *TokenServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"unsupported_grant_type"}`))
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != ts.clientID || secret != ts.clientSecret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
		return
	}
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	tok := base64.RawURLEncoding.EncodeToString(b)
	exp := ts.expiresIn.Load()
	ts.mu.Lock()
	ts.issued++
	ts.valid[tok] = time.Now().Add(time.Duration(exp) * time.Second)
	ts.scopes = strings.Fields(r.PostForm.Get("scope"))
	ts.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": exp})
}

// TestCA is a certificate authority generated for one test: it signs the
// client certificates an mTLS agent accepts.
type TestCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	Pool *x509.CertPool
}

// NewTestCA generates a CA (ECDSA P-256, valid one hour).
func NewTestCA(t testing.TB) *TestCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a2atest CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &TestCA{cert: cert, key: key, Pool: pool}
}

// ClientCert issues a client certificate for cn and returns it and its
// private key in PEM.
func (ca *TestCA) ClientCert(t testing.TB, cn string) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
}

// NewTLSAgent starts an agent like NewAgent, served over HTTPS with
// httptest's certificate, asking for client certificates signed by
// clientCAs (verified when given; MutualTLS then requires one).
func NewTLSAgent(t testing.TB, version string, clientCAs *x509.CertPool) *Agent {
	t.Helper()
	return newAgent(t, version, func(h http.Handler) *httptest.Server {
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused client certificates are expected
		srv.TLS = &tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: clientCAs, MinVersion: tls.VersionTLS12}
		srv.StartTLS()
		return srv
	})
}

// ServerCertificate returns the certificate of a TLS agent's server (for
// the client's root pool), or nil.
func (a *Agent) ServerCertificate() *x509.Certificate { return a.srv.Certificate() }
