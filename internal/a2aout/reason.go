package a2aout

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/netguard"
)

// Describe is Reason: the outbox keeps it on the record of a failed send.
func (s *Sender) Describe(err error) string { return Reason(err) }

// Reason returns what a record keeps of a failed send, readable by the
// tenant whose agent it is: the class of the failure (the agent's HTTP
// status, a JSON-RPC error code's standard name, a refused or timed-out
// connection, a TLS failure, the outbound guard's or the redirect guard's
// refusal, missing or refused credentials naming the scheme) and never the
// remote's own text: an answer's body, a JSON-RPC error's message, the
// address in a dial error. Kept on the record, that text would let a tenant
// read what a URL it chose answers. The full error goes to the logs.
func Reason(err error) string {
	if err == nil {
		return ""
	}
	// The guards' refusals first: a refused redirect also leaves the
	// redirect's status on the call.
	for _, ours := range []error{netguard.ErrRefused, netguard.ErrTooManyRedirects, ErrCrossOriginRedirect} {
		if errors.Is(err, ours) {
			return ours.Error()
		}
	}
	var ae *AuthError
	if errors.As(err, &ae) {
		c := *ae
		c.Err = errors.New(Reason(ae.Err))
		return c.Error()
	}
	var se *StatusError
	if errors.As(err, &se) {
		return se.Error()
	}
	var ee *EndpointError
	if errors.As(err, &ee) {
		return ee.Error()
	}
	var appErr *errs.Error
	if errors.As(err, &appErr) {
		return appErr.Error() // ours: an invalid card, URL or message
	}
	return classOf(err)
}

// rpcErrors are the A2A JSON-RPC errors by their standard names.
var rpcErrors = []error{
	a2a.ErrParseError, a2a.ErrInvalidRequest, a2a.ErrMethodNotFound, a2a.ErrInvalidParams,
	a2a.ErrInternalError, a2a.ErrServerError, a2a.ErrTaskNotFound, a2a.ErrTaskNotCancelable,
	a2a.ErrPushNotificationNotSupported, a2a.ErrUnsupportedOperation, a2a.ErrUnsupportedContentType,
	a2a.ErrExtendedCardNotConfigured, a2a.ErrExtensionSupportRequired,
	a2a.ErrVersionNotSupported, a2a.ErrUnauthenticated, a2a.ErrUnauthorized,
}

// classOf names the class of a transport or protocol failure.
func classOf(err error) string {
	if err == nil {
		return "failed"
	}
	for _, ours := range []error{netguard.ErrRefused, netguard.ErrTooManyRedirects, ErrCrossOriginRedirect} {
		if errors.Is(err, ours) {
			return ours.Error()
		}
	}
	if errors.Is(err, a2a.ErrInvalidAgentResponse) {
		return notA2A
	}
	for _, rpc := range rpcErrors {
		if errors.Is(err, rpc) {
			return "agent answered JSON-RPC error: " + rpc.Error()
		}
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out (context deadline exceeded)"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return "host name did not resolve"
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	if errors.As(err, &certErr) || errors.As(err, &unknownAuthority) || errors.As(err, &hostErr) {
		return "TLS certificate not trusted"
	}
	var alert tls.AlertError
	var recordErr tls.RecordHeaderError
	if errors.As(err, &alert) || errors.As(err, &recordErr) {
		return "TLS handshake failed"
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return "connection failed"
	}
	return notA2A
}

const notA2A = "the agent's answer is not a valid A2A response"
