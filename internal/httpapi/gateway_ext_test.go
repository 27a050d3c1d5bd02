package httpapi_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/authorizer"
)

var pushPath = regexp.MustCompile(`^/v1/agents/[^/]+/a2a$`)

// answeredBy marks the answers the gateway gave itself, without invoking
// the API function.
const answeredBy = "X-Test-Answered-By"

// gateway plays API Gateway's part in front of the API function on AWS, as
// far as authentication goes (no emulator of HTTP APIs runs here): a route
// with the authorizer answers a request without an Authorization header
// with 401 and asks the real Lambda authorizer (internal/authorizer) about
// any other; a refused token is 403; an authorised request becomes the
// payload 2.0 event carrying the authorizer's context and is served by the
// real adapter of the API function (aws-lambda-go-api-proxy) around api.
// public reports the routes deployed without the authorizer.
func gateway(t testing.TB, authz *authorizer.Authorizer, api http.Handler, public func(method, path string) bool) http.Handler {
	adapter := httpadapter.NewV2(api)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		headers := map[string]string{}
		for k, v := range r.Header {
			headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
			Headers: headers, Body: string(body),
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				RequestID: "req-1", Stage: "$default",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.1"},
			},
		}
		if !public(r.Method, r.URL.Path) {
			authHeader := r.Header.Get("Authorization")
			routeKey, identity := r.Method+" "+r.URL.Path, []string{authHeader}
			// The push route's authorizer has no identity source (as
			// infra/stack.go deploys it): API Gateway invokes it on every
			// request, with the route key as deployed and no
			// identitySource, and the authorizer reads the headers.
			if r.Method == "POST" && pushPath.MatchString(r.URL.Path) {
				routeKey, identity = auth.PushRoute, nil
			}
			if identity != nil && authHeader == "" {
				w.Header().Set(answeredBy, "gateway")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"message":"Unauthorized"}`)
				return
			}
			res, err := authz.Handle(context.Background(), events.APIGatewayV2CustomAuthorizerV2Request{
				Version: "2.0", Type: "REQUEST", IdentitySource: identity, RouteKey: routeKey,
				RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery, Headers: headers, RequestContext: ev.RequestContext,
			})
			if err != nil {
				w.Header().Set(answeredBy, "gateway")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = io.WriteString(w, `{"message":"Internal Server Error"}`)
				return
			}
			if !res.IsAuthorized {
				w.Header().Set(answeredBy, "gateway")
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = io.WriteString(w, `{"message":"Forbidden"}`)
				return
			}
			ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: res.Context}
		}
		resp, err := adapter.ProxyWithContext(context.Background(), ev)
		if err != nil {
			t.Errorf("API function failed: %v", err)
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		for k, vs := range resp.MultiValueHeaders {
			w.Header()[http.CanonicalHeaderKey(k)] = vs
		}
		w.WriteHeader(resp.StatusCode)
		out := []byte(resp.Body)
		if resp.IsBase64Encoded {
			out, _ = base64.StdEncoding.DecodeString(resp.Body)
		}
		_, _ = w.Write(out)
	})
}

func quietLog() *slog.Logger { return slog.New(slog.NewJSONHandler(io.Discard, nil)) }
