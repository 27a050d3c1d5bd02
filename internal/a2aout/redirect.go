package a2aout

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// ErrCrossOriginRedirect is the error of a request carrying credentials
// (a lapse task to an agent whose card declares security schemes, a token
// request, an OpenID Connect discovery) that was redirected to another
// origin: the redirect is not followed, so no secret reaches an origin
// other than the one it was stored for. Permanent reports it as permanent.
var ErrCrossOriginRedirect = errors.New("redirect to another origin refused: credentials are sent only to the origin they were stored for")

// Origin returns the scheme, host and port of u ("https://host:443"), the
// unit to which credentials are bound. Ports are explicit, so that
// https://h and https://h:443 are one origin.
func Origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch strings.ToLower(u.Scheme) {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// OriginOf is Origin of a URL string ("" when it does not parse).
func OriginOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return Origin(u)
}

// sameOriginRedirects returns a CheckRedirect that refuses a redirect to
// another origin than the first request's when authenticated says the
// request carries credentials, and otherwise defers to next (the guarded
// client's own checks: scheme, count).
func sameOriginRedirects(next func(*http.Request, []*http.Request) error, authenticated func(*http.Request) bool) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > 0 && Origin(req.URL) != Origin(via[0].URL) && authenticated(req) {
			return fmt.Errorf("%w (%s to %s)", ErrCrossOriginRedirect, Origin(via[0].URL), Origin(req.URL))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
}

// carriesCredentials reports whether a lapse task's request holds any
// credential: the agent's card declares a scheme the send chose.
func carriesCredentials(req *http.Request) bool {
	st, _ := req.Context().Value(callStateKey{}).(*callState)
	return st != nil && st.auth != nil && len(st.auth.schemes) > 0
}

func always(*http.Request) bool { return true }
