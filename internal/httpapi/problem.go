package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/store"
)

// statusOf maps error codes to HTTP statuses: the only place that does.
func statusOf(code errs.Code) int {
	switch code {
	case errs.Invalid:
		return http.StatusBadRequest
	case errs.Unauthorized:
		return http.StatusUnauthorized
	case errs.Forbidden:
		return http.StatusForbidden
	case errs.NotFound:
		return http.StatusNotFound
	case errs.Conflict:
		return http.StatusConflict
	case errs.TooLarge:
		return http.StatusRequestEntityTooLarge
	case errs.MethodNotAllowed:
		return http.StatusMethodNotAllowed
	case errs.TooManyRequests:
		return http.StatusTooManyRequests
	case errs.Unavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// Problem is an RFC 9457 problem details body.
type Problem struct {
	Type   string            `json:"type"`
	Title  string            `json:"title"`
	Status int               `json:"status"`
	Detail string            `json:"detail,omitempty"`
	Errors []errs.FieldError `json:"errors,omitempty"`
}

// ProblemOf returns the problem details that answer err, and whether err is
// internal: then its details are withheld from the answer and the caller
// must log it. The HTTP routes and the MCP tools (internal/mcpapi) answer
// every error with it.
func ProblemOf(err error) (p Problem, internal bool) {
	if errors.Is(err, store.ErrTooLarge) {
		// Within the body limit but over what one record may hold: the
		// client's to fix, like an oversized body.
		err = errs.E(errs.TooLarge, "the record this request would store exceeds the store's item limit of %d KB; send less", store.MaxItemBytes>>10)
	}
	code := errs.CodeOf(err)
	status := statusOf(code)
	p = Problem{Type: "about:blank", Title: http.StatusText(status), Status: status}
	var e *errs.Error
	if errors.As(err, &e) && code != errs.Internal {
		p.Detail = e.Message
		p.Errors = e.Fields
		p.Type = "https://clockwork.dev/problems/" + strings.ReplaceAll(string(code), "_", "-")
		return p, false
	}
	p.Detail = "internal error; it has been logged"
	return p, true
}

// writeError answers err as application/problem+json. Internal errors are
// logged with the request and answered without their details.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	p, internal := ProblemOf(err)
	if internal {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	status := p.Status
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="clockwork"`)
	}
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// respond answers an operation's result v with status, or returns its error
// err for the route to answer.
func respond[T any](w http.ResponseWriter, status int, v T, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, v)
	return nil
}
