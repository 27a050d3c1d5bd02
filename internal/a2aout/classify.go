package a2aout

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/retry"
)

// Classify says what kind of failure a Send's error is (the class a record
// and the console show), whether a retry can mend it (Permanent) and how
// long the agent asked to wait (Retry-After of a 429 or 5xx).
func Classify(err error) retry.Failure {
	f := retry.Failure{Class: classify(err), Permanent: Permanent(err)}
	var se *StatusError
	if errors.As(err, &se) {
		f.RetryAfter = se.RetryAfter
	}
	return f
}

func classify(err error) retry.Class {
	if errors.Is(err, netguard.ErrRefused) {
		return retry.Refused
	}
	if errors.Is(err, netguard.ErrTooManyRedirects) || errors.Is(err, ErrCrossOriginRedirect) {
		return retry.Misconfigured
	}
	var appErr *errs.Error
	if errors.As(err, &appErr) && appErr.Code == errs.Invalid {
		return retry.Misconfigured
	}
	var ae *AuthError
	if errors.As(err, &ae) {
		if ae.StatusCode == 0 && !ae.TLSRefused {
			// No request reached the agent: credentials could not be
			// obtained (a token endpoint's answer, below, or its outage).
			if c := httpClass(endpointStatus(ae.Err)); c != "" {
				return c
			}
			return transportClass(ae.Err)
		}
		return retry.Unauthorized
	}
	if c := httpClass(endpointStatus(err)); c != "" {
		return c
	}
	var se *StatusError
	if errors.As(err, &se) {
		return httpClass(se.StatusCode)
	}
	switch {
	case errors.Is(err, a2a.ErrUnauthenticated), errors.Is(err, a2a.ErrUnauthorized):
		return retry.Unauthorized
	case errors.Is(err, a2a.ErrInternalError), errors.Is(err, a2a.ErrServerError):
		return retry.ServerError
	}
	for _, sentinel := range permanentRPC {
		if errors.Is(err, sentinel) {
			return retry.Rejected
		}
	}
	return transportClass(err)
}

func endpointStatus(err error) int {
	var ee *EndpointError
	if errors.As(err, &ee) {
		return ee.StatusCode
	}
	return 0
}

// httpClass is the class of an HTTP status that is not a success ("" for
// none).
func httpClass(code int) retry.Class {
	switch {
	case code == 0:
		return ""
	case code == http.StatusTooManyRequests:
		return retry.Throttled
	case code >= 500, code == http.StatusRequestTimeout, code == http.StatusTooEarly:
		return retry.ServerError
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		return retry.Unauthorized
	default:
		return retry.Rejected
	}
}

// transportClass is the class of a failure to get an answer at all.
func transportClass(err error) retry.Class {
	var ne net.Error
	var dnsErr *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return retry.Timeout
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.As(err, &dnsErr):
		return retry.Unreachable
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return retry.Unreachable
	}
	return retry.Unknown
}
