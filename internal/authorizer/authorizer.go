// Package authorizer authenticates API requests on AWS at API Gateway: it is
// the HTTP API's Lambda authorizer (payload 2.0, simple responses), and the
// API function's side of it (Gateway).
//
// The authorizer checks the bearer token against the hashed tokens file
// (internal/auth) and returns the principal (name, scopes, agents) in its
// context. API Gateway answers a request without an Authorization header
// with 401 and one whose token is refused with 403, without invoking the API
// function. The API function reads the principal from the request's
// authorizer context and checks scopes and agents per route, exactly as the
// local server does.
package authorizer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"

	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/awsclient"
)

// Defaults of Authorizer.
const (
	// DefaultRefresh is how long a loaded tokens file is used before it is
	// read again, so a revoked token stops working within this time plus
	// API Gateway's authorizer cache TTL.
	DefaultRefresh = time.Minute
	// DefaultMaxStale is how long the last good tokens file is still used
	// when reading it again fails; after that every request fails closed.
	DefaultMaxStale = 15 * time.Minute
)

// Authorizer answers API Gateway HTTP API Lambda authorizer requests.
type Authorizer struct {
	// Load reads the tokens file ({"tokens":[...]}, see auth.File).
	Load     func(context.Context) ([]byte, error)
	Refresh  time.Duration // default DefaultRefresh
	MaxStale time.Duration // default DefaultMaxStale
	Now      func() time.Time
	Log      *slog.Logger

	mu       sync.Mutex
	authn    *auth.Authenticator
	loadedAt time.Time
}

// Handle authenticates the request's bearer token (the authorizer's
// identity source, the Authorization header; on the push route, which has
// an authorizer without identity source, the Authorization header or else
// the A2A 0.3 push sender's X-A2A-Notification-Token, see credential). A known token is authorised
// with the principal in the context (auth.Principal.Context); an unknown,
// malformed or missing one is refused. It returns an error only when no
// tokens file could be read at all, which API Gateway answers with 500:
// nothing is let in on a guess.
func (a *Authorizer) Handle(ctx context.Context, req events.APIGatewayV2CustomAuthorizerV2Request) (events.APIGatewayV2CustomAuthorizerSimpleResponse, error) {
	authn, err := a.tokens(ctx)
	if err != nil {
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{}, err
	}
	p, ok := authn.Authenticate(credential(req))
	if !ok {
		// The token is never logged, not even in part.
		a.log().Info("refused", "routeKey", req.RouteKey, "requestId", req.RequestContext.RequestID)
		return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: false}, nil
	}
	return events.APIGatewayV2CustomAuthorizerSimpleResponse{IsAuthorized: true, Context: p.Context()}, nil
}

// credential returns the request's credential as an Authorization header
// value. The token authorizer's identity source is the Authorization header
// (API Gateway sends its value, having refused a request without it). The
// push route's authorizer has no identity source, because API Gateway
// requires every listed source to be present and a push carries either
// header: there the headers are read, and the notification token counts
// only when no Authorization header was sent (auth.PushCredential).
func credential(req events.APIGatewayV2CustomAuthorizerV2Request) string {
	if len(req.IdentitySource) > 0 {
		return req.IdentitySource[0]
	}
	var authorization, notification string
	for k, v := range req.Headers {
		switch {
		case strings.EqualFold(k, "authorization"):
			authorization = v
		case strings.EqualFold(k, auth.NotificationTokenHeader) && req.RouteKey == auth.PushRoute:
			notification = v
		}
	}
	return auth.PushCredential(authorization, notification)
}

func (a *Authorizer) log() *slog.Logger {
	if a.Log == nil {
		return slog.Default()
	}
	return a.Log
}

// tokens returns the tokens, reading the file again once Refresh has
// passed. A failed read keeps the last good set for MaxStale.
func (a *Authorizer) tokens(ctx context.Context) (*auth.Authenticator, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	refresh, maxStale := a.Refresh, a.MaxStale
	if refresh <= 0 {
		refresh = DefaultRefresh
	}
	if maxStale <= 0 {
		maxStale = DefaultMaxStale
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	t := now()
	if a.authn != nil && t.Sub(a.loadedAt) < refresh {
		return a.authn, nil
	}
	raw, err := a.Load(ctx)
	var authn *auth.Authenticator
	if err == nil {
		authn, err = auth.Parse(raw)
	}
	if err != nil {
		if a.authn != nil && t.Sub(a.loadedAt) < maxStale {
			a.log().Error("reading the tokens again failed; using the last good tokens", "err", err, "loadedAt", a.loadedAt)
			return a.authn, nil
		}
		a.log().Error("no tokens: every request is refused", "err", err)
		return nil, fmt.Errorf("tokens: %w", err)
	}
	a.authn, a.loadedAt = authn, t
	return authn, nil
}

// FromEnv builds the authorizer of the Lambda function: the tokens file is
// the SSM SecureString named by TOKENS_PARAMETER, or TOKENS_JSON itself (for
// local runs); TOKENS_REFRESH is a Go duration (default DefaultRefresh);
// AWS_ENDPOINT_URL points the SSM client at an emulator. A missing or
// malformed variable is an error naming it.
func FromEnv(log *slog.Logger) (*Authorizer, error) {
	a := &Authorizer{Log: log}
	if v := os.Getenv("TOKENS_REFRESH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("TOKENS_REFRESH: %q is not a positive duration", v)
		}
		a.Refresh = d
	}
	param, inline := os.Getenv("TOKENS_PARAMETER"), os.Getenv("TOKENS_JSON")
	switch {
	case param != "":
		ac, err := awsclient.Config(context.Background(), os.Getenv("AWS_ENDPOINT_URL"))
		if err != nil {
			return nil, fmt.Errorf("aws configuration: %w", err)
		}
		a.Load = func(ctx context.Context) ([]byte, error) {
			v, err := awsclient.Parameter(ctx, ac, param)
			return []byte(v), err
		}
	case inline != "":
		a.Load = func(context.Context) ([]byte, error) { return []byte(inline), nil }
	default:
		return nil, errors.New("TOKENS_PARAMETER (or TOKENS_JSON) is required")
	}
	return a, nil
}

// MustStart is the authorizer main's setup: FromEnv, logging JSON to
// stderr; a configuration error is logged and exits, so it shows as the
// function's init error.
func MustStart() *Authorizer {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	a, err := FromEnv(log)
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(1)
	}
	return a
}

// Gateway is the API function's authenticator behind API Gateway: the
// principal is the one the Lambda authorizer returned for this request
// (httpapi.Authenticator). A request without a valid authorizer context (a
// route without the authorizer, a malformed context) is unauthenticated:
// it fails closed with 401.
type Gateway struct {
	Log *slog.Logger
}

// AuthenticateRequest returns the principal of the request's authorizer
// context, or false.
func (g Gateway) AuthenticateRequest(r *http.Request) (*auth.Principal, bool) {
	rc, ok := core.GetAPIGatewayV2ContextFromContext(r.Context())
	if !ok || rc.Authorizer == nil || rc.Authorizer.Lambda == nil {
		return nil, false
	}
	p, err := auth.FromContext(rc.Authorizer.Lambda)
	if err != nil {
		log := g.Log
		if log == nil {
			log = slog.Default()
		}
		log.Error("refusing a request with a malformed authorizer context", "err", err, "requestId", rc.RequestID)
		return nil, false
	}
	return p, true
}
