package client

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// FieldError names one failing field of a request, as the server's
// validation reports it: Path is the field's JSON path in the request
// ("expectations[0].dueAt", "credentials.bearer.token", or a query
// parameter's name) and Message says what is wrong.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error is an answer of the server that is not a success, decoded from its
// application/problem+json body (RFC 9457). Every call returns it, not
// wrapped, for a non-2xx status, so errors.As(err, &e) with e *Error gives
// the status and the server's explanation. An answer without a problem
// body (a proxy's, or API Gateway's {"message": ...}) still gives an *Error
// with the status, its standard title and the body's message as Detail.
type Error struct {
	// Type is the problem's type URI: https://clockwork.dev/problems/<code>
	// for clockwork's own errors, "about:blank" otherwise.
	Type string `json:"type"`
	// Title is the status's standard text.
	Title string `json:"title"`
	// Status is the HTTP status of the answer.
	Status int `json:"status"`
	// Detail is the server's explanation.
	Detail string `json:"detail,omitempty"`
	// Fields names each failing field of an invalid request.
	Fields []FieldError `json:"errors,omitempty"`
	// Method and Path are the request's (the path without the query).
	Method string `json:"-"`
	Path   string `json:"-"`
	// RetryAfter is the answer's Retry-After (0 when absent).
	RetryAfter time.Duration `json:"-"`
}

// Sentinel errors for errors.Is: an *Error is one of these when its status
// is the sentinel's. They carry no detail; use errors.As for it.
var (
	ErrBadRequest   = &Error{Status: http.StatusBadRequest}
	ErrUnauthorized = &Error{Status: http.StatusUnauthorized}
	ErrForbidden    = &Error{Status: http.StatusForbidden}
	ErrNotFound     = &Error{Status: http.StatusNotFound}
	ErrConflict     = &Error{Status: http.StatusConflict}
	ErrTooLarge     = &Error{Status: http.StatusRequestEntityTooLarge}
	ErrTooMany      = &Error{Status: http.StatusTooManyRequests}
	ErrUnavailable  = &Error{Status: http.StatusServiceUnavailable}
)

// Error returns one line: the request, the status, the title, the detail
// and each failing field.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("client: ")
	if e.Method != "" {
		b.WriteString(e.Method + " " + e.Path + ": ")
	}
	fmt.Fprintf(&b, "%d %s", e.Status, e.Title)
	if e.Detail != "" {
		b.WriteString(": " + e.Detail)
	}
	for _, f := range e.Fields {
		b.WriteString("; " + f.Path + ": " + f.Message)
	}
	return b.String()
}

// Is reports whether target is the sentinel of e's status (ErrNotFound for
// a 404, and so on); it never fails.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Method == "" && t.Type == "" && t.Status == e.Status
}

// Field returns the message for the failing field at path, and whether the
// server named that field.
func (e *Error) Field(path string) (string, bool) {
	for _, f := range e.Fields {
		if f.Path == path {
			return f.Message, true
		}
	}
	return "", false
}
