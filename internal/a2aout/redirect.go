package a2aout

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/agentclock/clockwork/internal/expect"
)

// ErrCrossOriginRedirect is the error of a request carrying credentials
// (a lapse task to an agent whose card declares security schemes, a token
// request, an OpenID Connect discovery) that was redirected to another
// origin: the redirect is not followed, so no secret reaches an origin
// other than the one it was stored for. Permanent reports it as permanent.
var ErrCrossOriginRedirect = errors.New("redirect to another origin refused: credentials are sent only to the origin they were stored for")

// Origin returns the scheme, host and port of u (expect.OriginOf).
func Origin(u *url.URL) string { return expect.OriginOf(u.String()) }

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

// carriesCredentials reports whether a request holds any credential: the
// agent's card declares a scheme the call chose, or the request carries a
// secret of clockwork's own (a push subscription's token).
func carriesCredentials(req *http.Request) bool {
	st, _ := req.Context().Value(callStateKey{}).(*callState)
	return st != nil && (st.secret || st.auth != nil && len(st.auth.schemes) > 0)
}

func always(*http.Request) bool { return true }
