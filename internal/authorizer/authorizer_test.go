package authorizer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/authorizer"
)

const tokensFile = `{"tokens":[
 {"token":"reader-token","principal":"reader","scopes":["read"],"agents":["agent-1","agent,2"]},
 {"tokenSha256":"` + adminHash + `","principal":"admin","scopes":["agents:write","read"],"agents":["*"]}]}`

// adminHash is the SHA-256 of "admin-token".
const adminHash = "10a4c7c9fc5206d6f36dc6944a81bb6f4a3cb0e25014ae3b12e6c3e52712292a"

func quiet() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }

func request(header string) events.APIGatewayV2CustomAuthorizerV2Request {
	r := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", Type: "REQUEST", RouteKey: "GET /v1/deadletters"}
	if header != "" {
		r.IdentitySource = []string{header}
		r.Headers = map[string]string{"authorization": header}
	}
	return r
}

func TestHandle(t *testing.T) {
	a := &authorizer.Authorizer{Load: func(context.Context) ([]byte, error) { return []byte(tokensFile), nil }, Log: quiet()}
	cases := []struct {
		name, header string
		ok           bool
		principal    *auth.Principal
	}{
		{"plain token", "Bearer reader-token", true, &auth.Principal{Name: "reader", Scopes: []auth.Scope{auth.Read}, Agents: []string{"agent-1", "agent,2"}}},
		{"unknown token", "Bearer nope", false, nil},
		{"no scheme", "reader-token", false, nil},
		{"basic scheme", "Basic cmVhZGVyLXRva2Vu", false, nil},
		{"empty bearer", "Bearer ", false, nil},
		{"missing", "", false, nil},
		{"oversized", "Bearer " + string(make([]byte, 4096)), false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := a.Handle(context.Background(), request(c.header))
			if err != nil {
				t.Fatal(err)
			}
			if res.IsAuthorized != c.ok {
				t.Fatalf("isAuthorized = %v, want %v", res.IsAuthorized, c.ok)
			}
			if !c.ok {
				if len(res.Context) != 0 {
					t.Fatalf("a refusal carries a context: %v", res.Context)
				}
				return
			}
			p, err := auth.FromContext(res.Context)
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != c.principal.Name || len(p.Scopes) != len(c.principal.Scopes) || p.Scopes[0] != c.principal.Scopes[0] ||
				len(p.Agents) != 2 || p.Agents[1] != "agent,2" {
				t.Fatalf("principal %+v, want %+v", p, c.principal)
			}
		})
	}
}

func TestHandleHashedTokenAndHeaderFallback(t *testing.T) {
	a := &authorizer.Authorizer{Load: func(context.Context) ([]byte, error) { return []byte(tokensFile), nil }, Log: quiet()}
	// No identitySource (a REQUEST authorizer without one): the header.
	res, err := a.Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"Authorization": "Bearer admin-token"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsAuthorized || res.Context[auth.ContextPrincipal] != "admin" || res.Context[auth.ContextScopes] != "agents:write read" {
		t.Fatalf("admin by hash: %+v", res)
	}
}

// A revoked token stops working once the tokens are read again; a failed
// read keeps the last good tokens for MaxStale, then fails closed.
func TestRefreshRevocationAndStaleness(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	current := []byte(tokensFile)
	var fail atomic.Bool
	var reads atomic.Int32
	a := &authorizer.Authorizer{
		Load: func(context.Context) ([]byte, error) {
			reads.Add(1)
			if fail.Load() {
				return nil, errors.New("ssm unavailable")
			}
			return current, nil
		},
		Refresh: time.Minute, MaxStale: 10 * time.Minute, Now: func() time.Time { return now }, Log: quiet(),
	}
	authorized := func() bool {
		t.Helper()
		res, err := a.Handle(context.Background(), request("Bearer reader-token"))
		if err != nil {
			t.Fatal(err)
		}
		return res.IsAuthorized
	}
	first, second := authorized(), authorized()
	if !first || !second || reads.Load() != 1 {
		t.Fatalf("first use: %d reads", reads.Load())
	}
	current = []byte(`{"tokens":[]}`) // revoked
	now = now.Add(59 * time.Second)
	if !authorized() {
		t.Fatal("revoked before the refresh interval passed")
	}
	now = now.Add(2 * time.Second)
	if authorized() {
		t.Fatal("a revoked token still works after the refresh interval")
	}
	current = []byte(tokensFile)
	now = now.Add(2 * time.Minute)
	if !authorized() {
		t.Fatal("restored token refused")
	}
	fail.Store(true)
	now = now.Add(5 * time.Minute)
	if !authorized() {
		t.Fatal("a failed read within MaxStale should keep the last good tokens")
	}
	now = now.Add(6 * time.Minute)
	if _, err := a.Handle(context.Background(), request("Bearer reader-token")); err == nil {
		t.Fatal("tokens older than MaxStale are still used")
	}
}

func TestNoTokensFailsClosed(t *testing.T) {
	for name, load := range map[string]func(context.Context) ([]byte, error){
		"unreadable": func(context.Context) ([]byte, error) { return nil, errors.New("denied") },
		"malformed":  func(context.Context) ([]byte, error) { return []byte(`{"tokens":[{"principal":"x"}]}`), nil },
	} {
		a := &authorizer.Authorizer{Load: load, Log: quiet()}
		res, err := a.Handle(context.Background(), request("Bearer reader-token"))
		if err == nil || res.IsAuthorized {
			t.Fatalf("%s: %+v, %v", name, res, err)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv("TOKENS_PARAMETER", "")
	t.Setenv("TOKENS_JSON", "")
	if _, err := authorizer.FromEnv(quiet()); err == nil {
		t.Fatal("no tokens source accepted")
	}
	t.Setenv("TOKENS_JSON", tokensFile)
	t.Setenv("TOKENS_REFRESH", "soon")
	if _, err := authorizer.FromEnv(quiet()); err == nil {
		t.Fatal("bad TOKENS_REFRESH accepted")
	}
	t.Setenv("TOKENS_REFRESH", "30s")
	a, err := authorizer.FromEnv(quiet())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Handle(context.Background(), request("Bearer reader-token")); err != nil || !res.IsAuthorized {
		t.Fatalf("%+v %v", res, err)
	}
}

// The API function's side: the principal comes only from the authorizer
// context of the Lambda event, never from anything the client sends.
func TestGateway(t *testing.T) {
	var got *auth.Principal
	var ok bool
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok = authorizer.Gateway{Log: quiet()}.AuthenticateRequest(r)
		w.WriteHeader(http.StatusNoContent)
	})
	adapter := httpadapter.NewV2(api)
	serve := func(lambda map[string]any, headers map[string]string) {
		t.Helper()
		got, ok = nil, false
		ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: "/v1/deadletters", Headers: headers,
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/v1/deadletters"}}}
		if lambda != nil {
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: lambda}
		}
		if _, err := adapter.ProxyWithContext(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	admin := (&auth.Principal{Name: "admin", Scopes: []auth.Scope{auth.Read}, Agents: []string{"*"}}).Context()
	serve(admin, nil)
	if !ok || got.Name != "admin" || !got.Can(auth.Read) || !got.ActsFor("anyone") {
		t.Fatalf("principal from context: %+v %v", got, ok)
	}
	// No authorizer context: a route deployed without the authorizer.
	serve(nil, map[string]string{"authorization": "Bearer admin-token"})
	if ok {
		t.Fatal("a request without an authorizer context was authenticated")
	}
	// A client cannot smuggle a context in the proxy library's header.
	serve(nil, map[string]string{"x-golambdaproxy-apigatewaycontext": `{"authorizer":{"lambda":{"principal":"admin","scopes":"read","agents":"[\"*\"]"}}}`})
	if ok {
		t.Fatal("a request context sent as a header was trusted")
	}
	for name, ctx := range map[string]map[string]any{
		"unknown scope":   {"principal": "x", "scopes": "root", "agents": `["*"]`},
		"agents not JSON": {"principal": "x", "scopes": "read", "agents": "*"},
		"no principal":    {"scopes": "read", "agents": `["*"]`},
		"number":          {"principal": 7, "scopes": "read", "agents": `["*"]`},
	} {
		serve(ctx, nil)
		if ok {
			t.Fatalf("%s: malformed context accepted", name)
		}
	}
	// Outside Lambda (no event at all).
	got, ok = authorizer.Gateway{Log: quiet()}.AuthenticateRequest(httptest.NewRequest("GET", "/", nil))
	if ok {
		t.Fatal("a plain request was authenticated")
	}
}

// The push route's authorizer has no identity source: it reads the headers,
// taking Authorization when present and else the A2A 0.3 push sender's
// X-A2A-Notification-Token (a bare token). The notification token counts on
// the push route only.
func TestHandlePushRoute(t *testing.T) {
	a := &authorizer.Authorizer{Load: func(context.Context) ([]byte, error) { return []byte(tokensFile), nil }, Log: quiet()}
	cases := []struct {
		name    string
		route   string
		headers map[string]string
		ok      bool
	}{
		{"notification token", auth.PushRoute, map[string]string{"x-a2a-notification-token": "reader-token"}, true},
		{"notification token, header name in any case", auth.PushRoute, map[string]string{"X-A2A-Notification-Token": "admin-token"}, true},
		{"bearer token", auth.PushRoute, map[string]string{"authorization": "Bearer reader-token"}, true},
		{"unknown notification token", auth.PushRoute, map[string]string{"x-a2a-notification-token": "nope"}, false},
		{"notification token with a bearer prefix", auth.PushRoute, map[string]string{"x-a2a-notification-token": "Bearer reader-token"}, false},
		{"bad bearer token wins over a good notification token", auth.PushRoute,
			map[string]string{"authorization": "Bearer nope", "x-a2a-notification-token": "reader-token"}, false},
		{"neither", auth.PushRoute, map[string]string{"content-type": "application/json"}, false},
		{"notification token on another route", "GET /v1/deadletters", map[string]string{"x-a2a-notification-token": "reader-token"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := events.APIGatewayV2CustomAuthorizerV2Request{Version: "2.0", Type: "REQUEST", RouteKey: c.route, Headers: c.headers}
			res, err := a.Handle(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.IsAuthorized != c.ok {
				t.Fatalf("isAuthorized = %v, want %v", res.IsAuthorized, c.ok)
			}
		})
	}
}
