// Package a2aout delivers lapse tasks: for each lapse the watcher sends one
// A2A message to the agent's JSON-RPC endpoint, with the official A2A Go SDK
// (github.com/a2aproject/a2a-go/v2). Cards that declare A2A 1.0 get the 1.0
// SendMessage method; cards that declare 0.3 get message/send in the 0.3 wire
// format through the SDK's compat transport (a2acompat/a2av0).
//
// Delivery is one attempt per Send call. The caller (the outbox) retries
// with backoff, and uses Permanent to tell errors that a retry cannot fix
// from transient ones. Retries carry the same messageId (see MessageID), so
// an agent can recognise duplicates.
package a2aout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/netguard"
	"github.com/agentclock/clockwork/internal/retry"
)

// ExtensionsHeader is the HTTP header that activates extensions (A2A 1.0
// and the expectations extension). The SDK's 0.3 transport sends the same
// value as "X-A2A-Extensions", the 0.3 spelling; Send sends both to a 0.3
// agent.
const ExtensionsHeader = "A2A-Extensions"

// DefaultTimeout bounds one Send when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// MaxResponseBytes caps how much of an agent's response is read; a longer
// response fails to decode (a transient error).
const MaxResponseBytes = 4 << 20

// Message is one lapse task message to deliver.
type Message struct {
	// MessageID is the A2A messageId; use MessageID to derive it. Required.
	MessageID string
	// ContextID is the origin task's contextId. Required.
	ContextID string
	// ReferenceTaskID is the origin task's id, sent in referenceTaskIds.
	// Required.
	ReferenceTaskID string
	// Skill is the lapse skill id sent in metadata[URI].skill; empty means
	// the card's declared lapseSkill.
	Skill string
	// Lapse is sent in metadata[URI].lapse.
	Lapse expect.Lapse
	// Text is the message's text part; empty means a generated sentence
	// describing the lapse.
	Text string
}

// MessageID returns the lapse message's messageId: a name-based (SHA-1)
// UUID over (expectationID, lapse, dueAt), so every retry and duplicate of
// one lapse carries the same id and different lapses get different ids. It
// is expect.MessageID (one derivation for the whole watcher: the id stored
// in a record's Delivery and the id sent are the same). It never fails.
func MessageID(expectationID string, lapse expect.LapseKind, dueAt string) string {
	return expect.MessageID(expectationID, lapse, dueAt)
}

// Options configure a Sender.
type Options struct {
	// HTTPClient sends the requests. Nil means a client guarded by
	// netguard with the zero Guard: loopback, private, link-local and other
	// special-purpose addresses are refused. The Sender wraps (a copy of)
	// the client's transport to add the extension header; the client passed
	// in is not modified.
	HTTPClient *http.Client
	// Timeout bounds one Send (connection, request and response). Zero
	// means DefaultTimeout; negative means no bound beyond ctx.
	Timeout time.Duration
	// Credentials gives the agent's credentials for the security
	// requirement of its card; nil sends none. Token endpoints and OpenID
	// Connect discovery are fetched with HTTPClient, through the same guard.
	Credentials CredentialSource
}

// Sender delivers lapse task messages. It is safe for concurrent use.
type Sender struct {
	timeout time.Duration
	factory *a2aclient.Factory
	http    *http.Client
	creds   CredentialSource
	tokens  *tokenCache
}

// NewSender returns a Sender configured by opts. It never fails.
func NewSender(opts Options) *Sender {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	base := opts.HTTPClient
	if base == nil {
		clientTimeout := timeout
		if clientTimeout < 0 {
			clientTimeout = 0
		}
		base = netguard.NewHTTPClient(netguard.Guard{}, clientTimeout)
	}
	client := *base
	inner := client.Transport
	if inner == nil {
		inner = http.DefaultTransport
	}
	client.Transport = &recordingTransport{base: &tlsTransports{base: inner, by: map[[32]byte]http.RoundTripper{}}}
	// A redirect never carries a credential to another origin: neither the
	// headers the SDK sets (Go keeps custom ones across hosts, and
	// Authorization across ports) nor those this transport adds per hop.
	client.CheckRedirect = sameOriginRedirects(base.CheckRedirect, carriesCredentials)
	// Token requests carry the client secret (in the body too, which a 307
	// repeats), and a discovery document names where it goes.
	tokenClient := *base
	tokenClient.CheckRedirect = sameOriginRedirects(base.CheckRedirect, always)

	factory := a2aclient.NewFactory(
		a2aclient.WithDefaultsDisabled(),
		a2aclient.WithJSONRPCTransport(&client),
		a2aclient.WithCallInterceptors(&a2aclient.AuthInterceptor{Service: credentialsService{}}),
	)
	return &Sender{timeout: timeout, factory: factory, http: &client, creds: opts.Credentials, tokens: newTokenCache(&tokenClient)}
}

// Outcome is what one delivered lapse task came back with.
type Outcome struct {
	// TaskID is the id of the task the agent created ("" when its answer
	// names none).
	TaskID string
	// Activated is true when the agent echoed the extension URI in its
	// A2A-Extensions response header (the extension's activation rule).
	Activated bool
}

// Send delivers m to the agent described by card and returns the id of the
// task the agent created: the returned Task's id, or the taskId of a Message
// answer ("" when the Message names no task).
//
// The A2A message has role user, one text part, messageId m.MessageID,
// contextId m.ContextID, referenceTaskIds [m.ReferenceTaskID], extensions
// [expect.URI] and metadata {expect.URI: {"lapse": m.Lapse, "skill": skill}};
// the request carries the A2A-Extensions header (and X-A2A-Extensions for
// 0.3) and asks the agent to return immediately (returnImmediately, or
// blocking: false in 0.3) rather than wait for the task to finish.
//
// Errors: an invalid card or message (no usable URL or protocol version,
// missing ids or skill) is an *errs.Error with Code errs.Invalid; an address
// refused by the guard matches netguard.ErrRefused; an HTTP status other
// than 200 is a *StatusError; a JSON-RPC error answered by the agent matches
// the a2a package's sentinel errors (a2a.ErrInvalidParams, ...). Use
// Permanent to decide whether to retry. Send never panics.
func (s *Sender) Send(ctx context.Context, card expect.Card, m Message) (taskID string, err error) {
	out, err := s.SendLapse(ctx, card, m)
	return out.TaskID, err
}

// SendLapse is Send, also reporting whether the agent activated the
// extension. Credentials: it attaches what the card's first satisfiable
// security requirement asks for (see Options.Credentials); an agent that
// answers 401 or 403 gives an *AuthError naming the schemes and the status
// (which Permanent reports as permanent), after one retry with freshly
// fetched tokens when the requirement used OAuth 2.0 or OpenID Connect.
func (s *Sender) SendLapse(ctx context.Context, card expect.Card, m Message) (Outcome, error) {
	if s == nil || s.factory == nil {
		return Outcome{}, errs.E(errs.Internal, "a2aout: Sender not built with NewSender")
	}
	out, err := s.sendOnce(ctx, card, m)
	var ae *AuthError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusUnauthorized && len(ae.tokens) > 0 && ctx.Err() == nil {
		for _, k := range ae.tokens {
			s.tokens.drop(k)
		}
		out, err = s.sendOnce(ctx, card, m)
	}
	var broken *brokenAfterClientCert
	if errors.As(err, &broken) && ctx.Err() == nil {
		// In TLS 1.3 the agent judges the client certificate after the
		// client's handshake has ended; its refusal races the request's
		// write and may surface as a reset instead of the alert. Once
		// more, on a fresh connection, to read the agent's answer.
		out, err = s.sendOnce(ctx, card, m)
	}
	return out, err
}

// sendOnce makes one attempt.
func (s *Sender) sendOnce(ctx context.Context, card expect.Card, m Message) (out Outcome, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	endpoint, err := endpointOf(card)
	if err != nil {
		return Outcome{}, err
	}
	req, err := buildRequest(card, m)
	if err != nil {
		return Outcome{}, err
	}

	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	plan, err := s.plan(ctx, card)
	if err != nil {
		return Outcome{}, fmt.Errorf("a2aout: send lapse message %s to agent %q at %s: %w", m.MessageID, card.AgentID, card.URL, err)
	}
	state := &callState{auth: plan}
	ctx = context.WithValue(ctx, callStateKey{}, state)
	// wrap names the schemes when the agent refused the credentials.
	wrap := func(err error) error {
		if code, _ := state.status(); code == http.StatusUnauthorized || code == http.StatusForbidden {
			err = &AuthError{Schemes: plan.schemes, Missing: plan.missing, Unbound: plan.unbound, StatusCode: code, Err: err, tokens: plan.tokens}
		} else if plan.cert != nil && tlsRefusal(err) {
			err = &AuthError{Schemes: plan.schemes, Missing: plan.missing, TLSRefused: true, Err: err}
		} else if plan.cert != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)) {
			err = &brokenAfterClientCert{err}
		}
		return fmt.Errorf("a2aout: send lapse message %s to agent %q at %s: %w", m.MessageID, card.AgentID, card.URL, err)
	}
	if card.ProtocolVersion == expect.ProtocolV03 {
		taskID, err := s.send03(ctx, card, req)
		if err != nil {
			return Outcome{}, wrap(err)
		}
		return Outcome{TaskID: taskID, Activated: state.activatedExt()}, nil
	}
	ctx = a2aclient.AttachServiceParams(ctx, a2aclient.ServiceParams{ExtensionsHeader: {expect.URI}})

	client, ctx, err := s.client10(ctx, card, endpoint, plan, wrap)
	if err != nil {
		return Outcome{}, err
	}
	defer func() { _ = client.Destroy() }()

	result, err := sendSafely(ctx, client, req)
	if err != nil {
		if code, retryAfter := state.status(); code != 0 && code != http.StatusOK {
			err = &StatusError{StatusCode: code, RetryAfter: retryAfter, Err: err}
		}
		return Outcome{}, wrap(err)
	}
	out.Activated = state.activatedExt()
	switch r := result.(type) {
	case *a2a.Task:
		if r != nil {
			out.TaskID = string(r.ID)
		}
	case *a2a.Message:
		if r != nil {
			out.TaskID = string(r.TaskID)
		}
	}
	return out, nil
}

// client10 returns the SDK's client of card's 1.0 endpoint, presenting the
// credentials plan chose, and the context to call it with; the caller
// destroys it. An error attaching the credentials goes through wrap; one
// building the client is Invalid.
func (s *Sender) client10(ctx context.Context, card expect.Card, endpoint *a2a.AgentInterface, plan *authPlan, wrap func(error) error) (*a2aclient.Client, context.Context, error) {
	client, err := s.factory.CreateFromEndpoints(ctx, []*a2a.AgentInterface{endpoint})
	if err != nil {
		return nil, ctx, &errs.Error{Code: errs.Invalid, Message: fmt.Sprintf("a2aout: no A2A client for %s (protocol %s): %v", card.URL, card.ProtocolVersion, err)}
	}
	if plan.sdkCard != nil {
		// The SDK's AuthInterceptor reads the scheme from the client's card
		// and the credential from credentialsService for the session.
		plan.sdkCard.SupportedInterfaces = []*a2a.AgentInterface{endpoint}
		if err := client.UpdateCard(plan.sdkCard); err != nil {
			_ = client.Destroy()
			return nil, ctx, wrap(err)
		}
		ctx = a2aclient.AttachSessionID(ctx, a2aclient.SessionID(card.AgentID))
	}
	return client, ctx, nil
}

// sendSafely calls the SDK and turns a panic inside it into an error.
func sendSafely(ctx context.Context, client *a2aclient.Client, req *a2a.SendMessageRequest) (res a2a.SendMessageResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("a2aout: A2A client panicked: %v", r)
		}
	}()
	return client.SendMessage(ctx, req)
}

// endpointOf returns the card's JSON-RPC interface for the SDK.
func endpointOf(card expect.Card) (*a2a.AgentInterface, error) {
	var version a2a.ProtocolVersion
	switch card.ProtocolVersion {
	case expect.ProtocolV1:
		version = a2a.Version
	case expect.ProtocolV03:
		version = "0.3"
	default:
		return nil, &errs.Error{Code: errs.Invalid, Message: "a2aout: invalid card",
			Fields: []errs.FieldError{{Path: "protocolVersion", Message: fmt.Sprintf("must be 1.0 or 0.3, not %q", card.ProtocolVersion)}}}
	}
	u, err := url.Parse(card.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return nil, &errs.Error{Code: errs.Invalid, Message: "a2aout: invalid card",
			Fields: []errs.FieldError{{Path: "url", Message: fmt.Sprintf("must be an absolute http or https URL, not %q", card.URL)}}}
	}
	return &a2a.AgentInterface{URL: card.URL, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: version}, nil
}

// buildRequest builds the SendMessage request for m.
func buildRequest(card expect.Card, m Message) (*a2a.SendMessageRequest, error) {
	skill := m.Skill
	if skill == "" {
		skill = card.Declaration.LapseSkill
	}
	var c errs.Collector
	if strings.TrimSpace(m.MessageID) == "" {
		c.Add("messageId", "required")
	}
	if strings.TrimSpace(m.ContextID) == "" {
		c.Add("contextId", "required: the origin task's context")
	}
	if strings.TrimSpace(m.ReferenceTaskID) == "" {
		c.Add("referenceTaskIds[0]", "required: the origin task")
	}
	if strings.TrimSpace(skill) == "" {
		c.Add("metadata.skill", "required: the card declares no lapseSkill")
	}
	// The lapse goes on the wire as plain JSON data.
	var lapse map[string]any
	if b, err := json.Marshal(m.Lapse); err != nil {
		c.Add("metadata.lapse", "cannot be encoded: %v", err)
	} else if err := json.Unmarshal(b, &lapse); err != nil {
		c.Add("metadata.lapse", "cannot be encoded: %v", err)
	}
	if err := c.Err("a2aout: invalid lapse message"); err != nil {
		return nil, err
	}

	text := m.Text
	if text == "" {
		text = describe(m.Lapse)
	}
	msg := &a2a.Message{
		ID:             m.MessageID,
		ContextID:      m.ContextID,
		Role:           a2a.MessageRoleUser,
		Parts:          a2a.ContentParts{a2a.NewTextPart(text)},
		ReferenceTasks: []a2a.TaskID{a2a.TaskID(m.ReferenceTaskID)},
		Extensions:     []string{expect.URI},
		Metadata: map[string]any{
			expect.URI: map[string]any{"lapse": lapse, "skill": skill},
		},
	}
	return &a2a.SendMessageRequest{
		Message: msg,
		Config:  &a2a.SendMessageConfig{ReturnImmediately: true},
	}, nil
}

// describe renders a lapse as a sentence for the message's text part.
func describe(l expect.Lapse) string {
	var why string
	switch l.Lapse {
	case expect.Skipped:
		why = "was skipped: a later expectation on the subject was satisfied while it was open"
		if len(l.SatisfiedAfter) > 0 {
			why += " (" + strings.Join(l.SatisfiedAfter, ", ") + ")"
		}
	case expect.Stalled:
		why = "stalled: its horizon passed with no fact on the subject"
	case expect.Refuted:
		why = "was refuted: a fact reported that it will not happen"
		if l.RefutedBy != nil {
			why += " (" + l.RefutedBy.FactKey + ", observed at " + l.RefutedBy.ObservedAt + ")"
		}
	default:
		why = "is overdue: it was due at " + l.DueAt + " and no matching fact arrived"
	}
	s := fmt.Sprintf("Expectation %s (%s on %s %s) %s. Expected: %s. Lapse determined at %s.",
		l.ExpectationID, l.Kind, l.Subject.Type, l.Subject.ID, why, l.Expects, l.LapsedAt)
	return s
}

// StatusError reports that the agent answered an HTTP status other than 200.
type StatusError struct {
	// StatusCode is the HTTP status of the (last) response.
	StatusCode int
	// RetryAfter is the delay the agent asked for in Retry-After (429, 503),
	// or zero.
	RetryAfter time.Duration
	// Err is the SDK's error.
	Err error
}

// Error describes the status.
func (e *StatusError) Error() string {
	return fmt.Sprintf("agent answered HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// Unwrap returns the SDK's error.
func (e *StatusError) Unwrap() error { return e.Err }

// Permanent reports whether err is one that retrying the same Send cannot
// fix: an address refused by the outbound guard (netguard.ErrRefused) or too
// many redirects, an invalid card, URL or message (errs.Invalid), an HTTP
// 4xx other than 408, 425 and 429 from the agent (so 401 and 403: an
// *AuthError) or from a token endpoint or OpenID Connect discovery, or a JSON-RPC error such as parse error,
// invalid request, method not found, invalid params, unsupported operation
// or content type, extension support required, version not supported,
// unauthenticated or unauthorized. Transport errors, timeouts and
// cancellations, HTTP 5xx, 408, 425 and 429, and JSON-RPC internal or server
// errors are transient (false). Permanent(nil) is false.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, netguard.ErrRefused) || errors.Is(err, netguard.ErrTooManyRedirects) || errors.Is(err, ErrCrossOriginRedirect) {
		return true
	}
	var appErr *errs.Error
	if errors.As(err, &appErr) && appErr.Code == errs.Invalid {
		return true
	}
	var ae *AuthError
	if errors.As(err, &ae) && ae.TLSRefused {
		return true
	}
	var ee *EndpointError
	if errors.As(err, &ee) {
		// A token endpoint refusing the client credentials will refuse
		// them again; its outages pass.
		return ee.StatusCode >= 400 && ee.StatusCode < 500 && ee.StatusCode != http.StatusRequestTimeout && ee.StatusCode != http.StatusTooManyRequests
	}
	var se *StatusError
	if errors.As(err, &se) {
		switch {
		case se.StatusCode == http.StatusRequestTimeout, se.StatusCode == http.StatusTooEarly, se.StatusCode == http.StatusTooManyRequests:
			return false
		case se.StatusCode >= 400 && se.StatusCode < 500:
			return true
		default:
			return false
		}
	}
	for _, sentinel := range permanentRPC {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

// permanentRPC are the JSON-RPC errors a retry of the same message cannot
// fix.
var permanentRPC = []error{
	a2a.ErrParseError,
	a2a.ErrInvalidRequest,
	a2a.ErrMethodNotFound,
	a2a.ErrInvalidParams,
	a2a.ErrUnsupportedOperation,
	a2a.ErrUnsupportedContentType,
	a2a.ErrExtensionSupportRequired,
	a2a.ErrVersionNotSupported,
	a2a.ErrUnauthenticated,
	a2a.ErrUnauthorized,
	a2a.ErrTaskNotFound,
	a2a.ErrTaskNotCancelable,
	a2a.ErrPushNotificationNotSupported,
}

// callStateKey carries a *callState in a request's context.
type callStateKey struct{}

// callState records what the transport saw during one Send.
type callState struct {
	auth *authPlan
	// secret is set when the request carries a secret of clockwork's own
	// (a push subscription's token, in the body): it never follows a
	// redirect to another origin, whatever the card declares.
	secret bool

	mu         sync.Mutex
	code       int
	retryAfter time.Duration
	activated  bool
}

func (c *callState) activatedExt() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.activated
}

func (c *callState) status() (int, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.code, c.retryAfter
}

// recordingTransport adds the extension header to every request, records
// the last response status in the request's callState and caps the size of
// response bodies.
type recordingTransport struct {
	base *tlsTransports
}

// echoes reports whether a response header activates the extension.
func echoes(h http.Header) bool {
	for _, name := range []string{ExtensionsHeader, "X-A2A-Extensions"} {
		for _, v := range h.Values(name) {
			for _, part := range strings.Split(v, ",") {
				if strings.TrimSpace(part) == expect.URI {
					return true
				}
			}
		}
	}
	return false
}

// RoundTrip implements http.RoundTripper without modifying req.
func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set(ExtensionsHeader, expect.URI)
	st, _ := req.Context().Value(callStateKey{}).(*callState)
	var plan *authPlan
	if st != nil {
		plan = st.auth
	}
	plan.apply(r)
	base, err := t.base.get(plan)
	if err != nil {
		return nil, err
	}
	resp, err := base.RoundTrip(r)
	if err == nil && resp != nil {
		if resp.Body != nil {
			resp.Body = &limitedBody{Reader: io.LimitReader(resp.Body, MaxResponseBytes), Closer: resp.Body}
		}
		if st != nil {
			st.mu.Lock()
			st.code = resp.StatusCode
			st.retryAfter = retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
			st.activated = echoes(resp.Header)
			st.mu.Unlock()
		}
	}
	return resp, err
}

// brokenAfterClientCert is a connection that broke during a send that
// presented a client certificate: possibly the agent refusing it (TLS 1.3
// reports that after the handshake), which SendLapse finds out by sending
// once more.
type brokenAfterClientCert struct{ err error }

func (b *brokenAfterClientCert) Error() string { return b.err.Error() }
func (b *brokenAfterClientCert) Unwrap() error { return b.err }

// limitedBody is a response body read through a limit.
type limitedBody struct {
	io.Reader
	io.Closer
}
