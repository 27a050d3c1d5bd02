// Package client is a typed Go client of the clockwork HTTP API (v1), the
// same on the embedded server (go run ./functions/local) and on AWS (API
// Gateway).
//
// Every call takes a context and returns either its answer or an error.
// An answer that is not a success is an *Error (use errors.As) carrying the
// application/problem+json body: status, type, title, detail and the
// failing fields. errors.Is(err, ErrNotFound) and the other sentinels match
// on the status alone. Any other error is a transport error (the server
// could not be reached or its answer could not be read), or the context's
// error when its deadline passed or it was canceled, wrapped so that
// errors.Is(err, context.DeadlineExceeded) holds.
//
// Calls are retried with exponential backoff and full jitter on 429, on 5xx
// (but 501) and on network errors, honouring Retry-After. That is safe
// because every call but one is idempotent on the server: raises are
// idempotent by expectationId (an identical body returns the stored
// record), facts by content (the same fact twice changes nothing),
// withdrawals (withdrawing a withdrawn expectation is a no-op), execution
// events by event_id, ANTICIPATE declarations (an identical re-submission is
// a 200), PUT and DELETE by nature, and redelivery (it only resets the
// attempt budget of an undelivered lapse). The exception is SubmitGrade: a
// second submission of a grade that was recorded is a 409, so it is retried
// only when the server surely did not process it (a 429, or a connection
// that could not be opened).
//
// A Client is safe for concurrent use and cheap per call: one http.Client
// with a tuned Transport and pooled request and response buffers; create one
// and share it.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options configure a Client. The zero value is usable: no token, 4
// attempts, backoff from 50 ms capped at 5 s, and a tuned transport.
type Options struct {
	// Token is the bearer token sent on every request but /healthz and
	// /openapi.json ("" sends none, which the server answers with 401).
	Token string
	// HTTPClient replaces the default http.Client, whose Transport keeps up
	// to 256 idle connections per host. Its Timeout, if any, bounds each
	// attempt.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts of one call, the first included (0:
	// 4; 1: no retries).
	MaxAttempts int
	// BaseDelay is the backoff before the first retry, doubled for each
	// further one (0: 50 ms); the wait is drawn uniformly from zero to it
	// (full jitter).
	BaseDelay time.Duration
	// MaxDelay caps the backoff (0: 5 s).
	MaxDelay time.Duration
	// MaxRetryAfter is the longest Retry-After the client waits for; a
	// longer one ends the call with the answer's *Error (0: 60 s).
	MaxRetryAfter time.Duration
	// MaxResponseBytes bounds an answer read into memory (0: 256 MiB);
	// a longer one is a transport error. Bundle streams and is not bounded.
	MaxResponseBytes int64
	// UserAgent is sent as User-Agent (default "clockwork-go-client").
	UserAgent string
}

// Client calls one clockwork server. Create it with New; it is safe for
// concurrent use.
type Client struct {
	base        string // scheme://host[/prefix], no trailing slash
	auth        []string
	userAgent   []string
	hc          *http.Client
	maxAttempts int
	baseDelay   time.Duration
	maxDelay    time.Duration
	maxRetry    time.Duration
	maxResp     int64
}

var (
	jsonType   = []string{"application/json"}
	acceptJSON = []string{"application/json, application/problem+json"}
)

// NewTransport returns the transport a Client uses by default: keep-alive
// connections, up to 256 idle per host (a client at thousands of requests
// per second otherwise opens and closes connections), HTTP/2 when the
// server offers it over TLS, and bounded dial and TLS handshake times. It
// never fails.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// New returns a client of the server at baseURL (for example
// "http://127.0.0.1:8080" or an API Gateway stage URL). It returns an error
// when baseURL is not an absolute http or https URL without query or
// fragment.
func New(baseURL string, opts Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: base URL %q must be an absolute http(s) URL without query or fragment", baseURL)
	}
	c := &Client{
		base:        strings.TrimRight(u.String(), "/"),
		hc:          opts.HTTPClient,
		maxAttempts: opts.MaxAttempts,
		baseDelay:   opts.BaseDelay,
		maxDelay:    opts.MaxDelay,
		maxRetry:    opts.MaxRetryAfter,
		maxResp:     opts.MaxResponseBytes,
		userAgent:   []string{opts.UserAgent},
	}
	if opts.Token != "" {
		c.auth = []string{"Bearer " + opts.Token}
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: NewTransport()}
	}
	if c.maxAttempts <= 0 {
		c.maxAttempts = 4
	}
	if c.baseDelay <= 0 {
		c.baseDelay = 50 * time.Millisecond
	}
	if c.maxDelay <= 0 {
		c.maxDelay = 5 * time.Second
	}
	if c.maxRetry <= 0 {
		c.maxRetry = time.Minute
	}
	if c.maxResp <= 0 {
		c.maxResp = 256 << 20
	}
	if opts.UserAgent == "" {
		c.userAgent[0] = "clockwork-go-client"
	}
	return c, nil
}

// call describes one API call.
type call struct {
	method string
	path   string // escaped path, from the root
	query  string // encoded query, without '?'
	body   any    // JSON-encoded; json.RawMessage and []byte are sent as they are
	public bool   // no Authorization header
	// once marks a call that is not idempotent: retried only when the
	// server surely did not process it.
	once bool
	// out receives the decoded answer (nil: the answer is discarded);
	// *json.RawMessage receives it as it is.
	out any
	// stream, when set, receives the answer's body instead of out.
	stream io.Writer
	// status, when set, receives the answer's status code.
	status *int
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// sharedBody is a request body shared by the attempts of one call. The
// buffer goes back to the pool when the call and every attempt's body
// (which a transport may close after RoundTrip returns) are done with it.
type sharedBody struct {
	buf  *bytes.Buffer
	refs atomic.Int32
}

func (s *sharedBody) release() {
	if s.refs.Add(-1) == 0 {
		if s.buf.Cap() <= 1<<20 {
			s.buf.Reset()
			bufPool.Put(s.buf)
		}
	}
}

func (s *sharedBody) reader() io.ReadCloser {
	s.refs.Add(1)
	b := &attemptBody{owner: s}
	b.Reset(s.buf.Bytes())
	return b
}

type attemptBody struct {
	bytes.Reader
	owner  *sharedBody
	closed atomic.Bool
}

func (b *attemptBody) Close() error {
	if b.closed.CompareAndSwap(false, true) {
		b.owner.release()
	}
	return nil
}

func (c *Client) do(ctx context.Context, k call) error {
	var body *sharedBody
	if k.body != nil {
		buf := bufPool.Get().(*bytes.Buffer)
		body = &sharedBody{buf: buf}
		body.refs.Store(1)
		defer body.release()
		switch b := k.body.(type) {
		case json.RawMessage:
			buf.Write(b)
		case []byte:
			buf.Write(b)
		default:
			if err := json.NewEncoder(buf).Encode(b); err != nil {
				return fmt.Errorf("client: %s %s: encoding the request: %w", k.method, k.path, err)
			}
		}
	}
	target := c.base + k.path
	if k.query != "" {
		target += "?" + k.query
	}
	for attempt := 1; ; attempt++ {
		retry, after, err := c.attempt(ctx, k, target, body)
		if err == nil {
			return nil
		}
		if !retry || attempt >= c.maxAttempts {
			return err
		}
		wait := after
		if wait == 0 {
			wait = c.backoff(attempt)
		} else if wait > c.maxRetry {
			return err
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// The wait would outlast the deadline: answer now with what
			// the server said rather than the deadline's error.
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("client: %s %s: %w (last attempt: %v)", k.method, k.path, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// backoff is the full-jitter wait before retry n (1 for the first retry).
func (c *Client) backoff(n int) time.Duration {
	d := c.baseDelay << (n - 1)
	if d <= 0 || d > c.maxDelay {
		d = c.maxDelay
	}
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

// attempt makes one request. It returns whether the call may be retried,
// the Retry-After the server asked for, and the call's error.
func (c *Client) attempt(ctx context.Context, k call, target string, body *sharedBody) (retry bool, after time.Duration, err error) {
	var rc io.ReadCloser
	if body != nil {
		rc = body.reader()
	}
	req, err := http.NewRequestWithContext(ctx, k.method, target, rc)
	if err != nil {
		if rc != nil {
			rc.Close()
		}
		return false, 0, fmt.Errorf("client: %s %s: %w", k.method, k.path, err)
	}
	if body != nil {
		req.ContentLength = int64(body.buf.Len())
		req.GetBody = func() (io.ReadCloser, error) { return body.reader(), nil }
		req.Header["Content-Type"] = jsonType
	}
	req.Header["Accept"] = acceptJSON
	req.Header["User-Agent"] = c.userAgent
	if !k.public && c.auth != nil {
		req.Header["Authorization"] = c.auth
	}
	res, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return false, 0, fmt.Errorf("client: %s %s: %w", k.method, k.path, ctx.Err())
		}
		return !k.once || notSent(err), 0, fmt.Errorf("client: %s %s: %w", k.method, k.path, err)
	}
	defer res.Body.Close()
	if k.status != nil {
		*k.status = res.StatusCode
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if k.stream != nil {
			if _, err := io.Copy(k.stream, res.Body); err != nil {
				return false, 0, fmt.Errorf("client: %s %s: reading the answer: %w", k.method, k.path, err)
			}
			return false, 0, nil
		}
		if err := c.decode(res, k.out); err != nil {
			return !k.once, 0, fmt.Errorf("client: %s %s: reading the answer: %w", k.method, k.path, err)
		}
		return false, 0, nil
	}
	e := c.readError(res)
	e.Method, e.Path = k.method, k.path
	retry = res.StatusCode == http.StatusTooManyRequests ||
		(!k.once && res.StatusCode >= 500 && res.StatusCode != http.StatusNotImplemented)
	return retry, e.RetryAfter, e
}

// notSent reports whether a transport error happened before the request
// could reach the server (the connection could not be opened).
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func (c *Client) decode(res *http.Response, out any) error {
	if out == nil {
		_, err := io.Copy(io.Discard, io.LimitReader(res.Body, c.maxResp))
		return err
	}
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	n, err := buf.ReadFrom(io.LimitReader(res.Body, c.maxResp+1))
	if err != nil {
		return err
	}
	if n > c.maxResp {
		return fmt.Errorf("the answer exceeds %d bytes (Options.MaxResponseBytes)", c.maxResp)
	}
	if raw, ok := out.(*json.RawMessage); ok {
		*raw = append((*raw)[:0], bytes.TrimSpace(buf.Bytes())...)
		return nil
	}
	return json.Unmarshal(buf.Bytes(), out)
}

// readError turns a non-2xx answer into an *Error: the problem+json body
// when there is one, else the status and up to 1 KiB of the body as the
// detail (API Gateway's own answers, for example, are {"message":...}).
func (c *Client) readError(res *http.Response) *Error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	e := &Error{}
	if err := json.Unmarshal(b, e); err != nil || e.Status == 0 {
		*e = Error{}
		var gw struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &gw) == nil && gw.Message != "" {
			e.Detail = gw.Message
		} else {
			e.Detail = strings.TrimSpace(string(b[:min(len(b), 1024)]))
		}
	}
	e.Status = res.StatusCode
	if e.Title == "" {
		e.Title = http.StatusText(res.StatusCode)
	}
	if e.Type == "" {
		e.Type = "about:blank"
	}
	e.RetryAfter = retryAfter(res.Header.Get("Retry-After"), time.Now())
	return e
}

// retryAfter parses a Retry-After value (delay-seconds or an HTTP date);
// 0 when absent or invalid.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
