package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/jsonwalk"
)

// readBody reads the whole body within the handler's limit.
func (h *Handler) readBody(r *http.Request) ([]byte, error) {
	return h.readBodyWithin(r, h.MaxBody, maxDepth)
}

// readBodyWithin reads the whole body within limit bytes and depth levels
// of JSON nesting (checkBody).
func (h *Handler) readBodyWithin(r *http.Request, limit int64, depth int) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.Contains(ct, "json") {
		return nil, errs.Fields("unsupported content type", []errs.FieldError{{Path: "Content-Type", Message: "must be application/json"}})
	}
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, errs.E(errs.TooLarge, "request body exceeds %d bytes", limit)
	}
	if err != nil {
		return nil, errs.E(errs.Invalid, "could not read the request body")
	}
	return b, checkBody(b, limit, depth)
}

// checkBody refuses an empty JSON text, one over limit bytes and one nested
// deeper than depth: the bounds of every request body, and of an MCP tool's
// arguments.
func checkBody(b []byte, limit int64, depth int) error {
	if int64(len(b)) > limit {
		return errs.E(errs.TooLarge, "request body exceeds %d bytes", limit)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return errs.Fields("empty body", []errs.FieldError{{Path: "", Message: "a JSON body is required"}})
	}
	if d := jsonDepth(b); d > depth {
		return errs.Fields("body nested too deeply", []errs.FieldError{{Path: "", Message: fmt.Sprintf("JSON nesting deeper than %d", depth)}})
	}
	// encoding/json would replace such bytes with U+FFFD silently, and a
	// fact that sends U+FFFD would then match what was stored.
	if path, bad := jsonwalk.InvalidString(b); bad {
		return errs.Fields("invalid text", []errs.FieldError{{Path: path, Message: "is not valid UTF-8 (or holds an unpaired surrogate escape)"}})
	}
	return nil
}

// checkText wraps a route's handler so that a path parameter or a query
// parameter (name or value) that is not valid UTF-8 is refused, naming it,
// before the handler reads it.
func checkText(pattern string, fn func(http.ResponseWriter, *http.Request) error) func(http.ResponseWriter, *http.Request) error {
	var names []string
	for rest := pattern; ; {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			break
		}
		names = append(names, strings.TrimSuffix(rest[i+1:i+j], "..."))
		rest = rest[i+j:]
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		for _, n := range names {
			if !utf8.ValidString(r.PathValue(n)) {
				return errs.Fields("invalid text", []errs.FieldError{{Path: n, Message: "is not valid UTF-8"}})
			}
		}
		for k, vs := range r.URL.Query() {
			if !utf8.ValidString(k) {
				return errs.Fields("invalid text", []errs.FieldError{{Path: strings.ToValidUTF8(k, "\ufffd"), Message: "is a query parameter name that is not valid UTF-8"}})
			}
			for _, v := range vs {
				if !utf8.ValidString(v) {
					return errs.Fields("invalid text", []errs.FieldError{{Path: k, Message: "is not valid UTF-8"}})
				}
			}
		}
		return fn(w, r)
	}
}

const maxDepth = 32

// jsonDepth returns the maximum nesting depth of a JSON text (ignoring
// brackets inside strings).
func jsonDepth(b []byte) int {
	depth, max, inStr, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
			if depth > max {
				max = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return max
}

// decodeStrict decodes b into v, rejecting unknown fields and trailing
// data, and names the failing field.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonErrorIn(b, err)
	}
	if dec.More() {
		return errs.Fields("malformed JSON", []errs.FieldError{{Path: "", Message: "unexpected data after the JSON value"}})
	}
	return nil
}

// jsonErrorIn is jsonError for a decode of b: a type error names the JSON
// path of the value (with array indexes), not encoding/json's Field, which
// carries the Go names of embedded structs ("withdrawRequest.withdraw").
func jsonErrorIn(b []byte, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		path := te.Field
		if p, ok := jsonwalk.PathAt(b, te.Offset); ok {
			path = p
		}
		return errs.Fields("malformed JSON", []errs.FieldError{{Path: path, Message: fmt.Sprintf("must be %s, not %s", jsonType(te.Type.Kind().String()), te.Value)}})
	}
	return jsonError(err)
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		return errs.Fields("malformed JSON", []errs.FieldError{{Path: te.Field, Message: fmt.Sprintf("must be %s, not %s", jsonType(te.Type.Kind().String()), te.Value)}})
	case errors.As(err, &se):
		return errs.Fields("malformed JSON", []errs.FieldError{{Path: "", Message: fmt.Sprintf("syntax error at byte %d: %s", se.Offset, se.Error())}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return errs.Fields("malformed JSON", []errs.FieldError{{Path: name, Message: "is not a known field"}})
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return errs.Fields("malformed JSON", []errs.FieldError{{Path: "", Message: "the JSON body ends early"}})
	default:
		return errs.Fields("malformed JSON", []errs.FieldError{{Path: "", Message: err.Error()}})
	}
}

func jsonType(kind string) string {
	switch kind {
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	default:
		return "a number"
	}
}
