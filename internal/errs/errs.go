// Package errs holds the application's error codes. Domain and service code
// return *Error values with a Code; the HTTP layer maps codes to statuses in
// one place (package httpapi), so no handler decides a status on its own.
package errs

import (
	"errors"
	"fmt"
	"strings"
)

// Code classifies an error for callers.
type Code string

// Error codes.
const (
	Invalid          Code = "invalid"            // 400: the request is malformed or breaks a rule
	Unauthorized     Code = "unauthorized"       // 401: no valid credentials
	Forbidden        Code = "forbidden"          // 403: credentials lack a scope or agent
	NotFound         Code = "not_found"          // 404
	Conflict         Code = "conflict"           // 409: immutability, reuse or sealing
	TooLarge         Code = "too_large"          // 413: body above the limit
	MethodNotAllowed Code = "method_not_allowed" // 405: a method the path does not take
	TooManyRequests  Code = "too_many_requests"  // 429: slow down; retry after a while
	Unavailable      Code = "unavailable"        // 503: a dependency is down; retry
	Internal         Code = "internal"           // 500: a bug; details are logged, never sent
)

// FieldError names one failing field by its JSON path.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Error is an application error: a code, a message safe to show a client,
// and for Invalid the failing fields.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
}

func (e *Error) Error() string {
	if len(e.Fields) == 0 {
		return e.Message
	}
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Path + ": " + f.Message
	}
	return e.Message + " (" + strings.Join(parts, "; ") + ")"
}

// E returns an *Error with a formatted message.
func E(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Fields returns an Invalid error listing fields, or nil when there are none.
func Fields(message string, fields []FieldError) error {
	if len(fields) == 0 {
		return nil
	}
	return &Error{Code: Invalid, Message: message, Fields: fields}
}

// CodeOf returns the code of err, Internal for an error without one, and
// "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return CodeOf(err) == code }

// Collector gathers field errors under a path prefix.
type Collector struct{ List []FieldError }

// Add records a failing field.
func (c *Collector) Add(path, format string, args ...any) {
	c.List = append(c.List, FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
}

// Err returns the collected errors as an Invalid error, or nil.
func (c *Collector) Err(message string) error { return Fields(message, c.List) }
