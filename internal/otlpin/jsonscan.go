package otlpin

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/jsonwalk"
)

// filterJSON checks an OTLP JSON request against l as it scans it once,
// byte by byte, allocating nothing per value. What it decodes into is
// bounded by the element budget (Limits.MaxElements): every object and
// every array element spends one, known to OTLP or not. Its text must be
// UTF-8 without unpaired surrogate escapes (JSON's, which protojson would
// take with replacement characters). It returns the body for
// protojson: the trace and span ids rewritten from OTLP JSON's hex to the
// base64 protobuf JSON expects, and each span past a limit replaced by its
// ids alone; and the spans so refused. Errors: a *LimitError for the
// request as a whole; a *TextError; a syntax error naming the offset.
func filterJSON(body []byte, l Limits) ([]byte, []RefusedSpan, error) {
	s := &jscan{b: body, l: l, budget: &budget{max: l.MaxElements}, badText: -1}
	s.ws()
	if err := s.object(func(key string) error {
		if is(key, "resourceSpans", "resource_spans") {
			return s.array(func(int) error { return s.resourceSpans() })
		}
		return s.skip()
	}); err != nil {
		return nil, nil, err
	}
	s.ws()
	if s.i != len(s.b) {
		return nil, nil, s.syntax("text after the request's object")
	}
	if err := s.budget.check(); err != nil {
		return nil, nil, err
	}
	if s.badText >= 0 {
		// Where, as a path: the scan has bounded the body's nesting.
		path, _ := jsonwalk.InvalidString(body)
		if path == "" {
			path = fmt.Sprintf("body (offset %d)", s.badText)
		}
		return nil, nil, &TextError{Path: path}
	}
	if len(s.edits) == 0 {
		return body, s.refused, nil
	}
	out := make([]byte, 0, len(body))
	last := 0
	for _, e := range s.edits {
		out = append(out, body[last:e.start]...)
		out = append(out, e.repl...)
		last = e.end
	}
	return append(out, body[last:]...), s.refused, nil
}

// jscan is the state of filterJSON's scan.
type jscan struct {
	b       []byte
	i       int
	l       Limits
	depth   int
	spans   int
	edits   []edit
	refused []RefusedSpan
	budget  *budget
	// badText is the offset of the first string that is not valid text
	// (-1: none).
	badText int
	// escapedNames counts the member names decoded (see name).
	escapedNames int
}

// edit replaces b[start:end] in the body handed to protojson.
type edit struct {
	start, end int
	repl       string
}

// is reports whether a member name names a field: protojson takes its JSON
// name (traceId) and its proto name (trace_id), and no other spelling.
func is(key, jsonName, protoName string) bool { return key == jsonName || key == protoName }

func (s *jscan) syntax(what string) error {
	return fmt.Errorf("not JSON: %s at offset %d", what, s.i)
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jscan) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// enter counts one level of nesting.
func (s *jscan) enter() error {
	if s.depth++; s.depth > s.l.maxJSONDepth() {
		return &LimitError{Path: "body", Message: fmt.Sprintf("the request is nested more than %d deep", s.l.maxJSONDepth())}
	}
	return nil
}

// object scans an object, calling member for each member's name with the
// scan at its value, which member must consume (nil: every value is
// skipped and no name decoded). A value that is not an object is skipped
// (protojson reports it).
func (s *jscan) object(member func(key string) error) error {
	s.ws()
	if s.peek() != '{' {
		return s.skip()
	}
	if err := s.enter(); err != nil {
		return err
	}
	s.budget.used++ // checked at each span's end and the request's
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		s.ws()
		start, end, err := s.str()
		if err != nil {
			return err
		}
		s.ws()
		if s.peek() != ':' {
			return s.syntax("a missing ':'")
		}
		s.i++
		s.ws()
		if member == nil {
			err = s.skip()
		} else {
			key, kerr := s.name(start, end)
			if kerr != nil {
				return kerr
			}
			err = member(key)
		}
		if err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("a missing ',' or '}'")
		}
	}
}

// name is the member name b[start:end] (quotes included). A name with
// escapes is decoded, which allocates: each counts against the budget at
// once; one too long to be a field's is returned as it is sent.
func (s *jscan) name(start, end int) (string, error) {
	raw := s.b[start+1 : end-1]
	if bytes.IndexByte(raw, '\\') < 0 || len(raw) > 96 {
		return string(raw), nil
	}
	if s.escapedNames++; s.escapedNames > s.l.MaxElements {
		return "", (&budget{used: s.escapedNames, max: s.l.MaxElements}).check()
	}
	var key string
	if err := json.Unmarshal(s.b[start:end], &key); err != nil {
		return "", s.syntax("a bad member name")
	}
	return key, nil
}

// array scans an array, calling elem with each element's index (from 1)
// and the scan at it; elem must consume it. A value that is not an array
// is skipped.
func (s *jscan) array(elem func(n int) error) error {
	s.ws()
	if s.peek() != '[' {
		return s.skip()
	}
	if err := s.enter(); err != nil {
		return err
	}
	s.i++
	s.ws()
	if s.peek() == ']' {
		s.i++
		s.depth--
		return nil
	}
	for n := 1; ; n++ {
		s.ws()
		s.budget.used++
		if err := elem(n); err != nil {
			return err
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.syntax("a missing ',' or ']'")
		}
	}
}

// str scans a string and returns its bounds, quotes included, noting the
// first that is not valid text (s.badText): bytes that are not UTF-8, or
// a surrogate escape out of its pair.
func (s *jscan) str() (int, int, error) {
	if s.peek() != '"' {
		return 0, 0, s.syntax("a missing string")
	}
	start := s.i
	s.i++
	ascii := true
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			if !ascii && s.badText < 0 && !utf8.Valid(s.b[start:s.i]) {
				s.badText = start
			}
			return start, s.i, nil
		case c == '\\':
			if s.i+1 < len(s.b) && s.b[s.i+1] == 'u' {
				s.escape(start)
			}
			s.i += 2
		case c < 0x20:
			return 0, 0, s.syntax("a control character in a string")
		default:
			if c >= 0x80 {
				ascii = false
			}
			s.i++
		}
	}
	return 0, 0, s.syntax("an unterminated string")
}

// escape checks the \u escape at s.i: a high surrogate must be followed by
// a low one, and a low one must follow a high one (JSON's text is UTF-16
// in its escapes).
func (s *jscan) escape(start int) {
	r, ok := hex4(s.b, s.i+2)
	if !ok || s.badText >= 0 {
		return // a bad escape is protojson's syntax error
	}
	switch {
	case utf16.IsSurrogate(r) && r < 0xdc00:
		if next, ok := hex4(s.b, s.i+8); !ok || s.i+7 >= len(s.b) || s.b[s.i+6] != '\\' || s.b[s.i+7] != 'u' || next < 0xdc00 || next > 0xdfff {
			s.badText = start
			return
		}
		s.i += 6 // the pair's low half
	case utf16.IsSurrogate(r):
		s.badText = start
	}
}

// hex4 reads the four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// skip scans any value.
func (s *jscan) skip() error {
	s.ws()
	switch c := s.peek(); {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array(func(int) error { return s.skip() })
	case c == '"':
		_, _, err := s.str()
		return err
	case c == 0:
		return s.syntax("a missing value")
	default:
		start := s.i
		for s.i < len(s.b) && !strings.ContainsRune(",}] \t\n\r", rune(s.b[s.i])) {
			s.i++
		}
		if s.i == start {
			return s.syntax("a missing value")
		}
		return nil
	}
}

// checkedString scans a value and checks its length if it is a string.
func (s *jscan) checkedString(c *spanCheck, what string) error {
	if s.peek() != '"' {
		return s.skip()
	}
	start, end, err := s.str()
	if err == nil {
		c.value(end-start-2, what)
	}
	return err
}

// id scans an id's hex string and rewrites it to base64; into, when not
// nil, receives its bytes.
func (s *jscan) id(name string, into *[]byte) error {
	if s.peek() != '"' {
		return s.skip()
	}
	start, end, err := s.str()
	if err != nil {
		return err
	}
	var text string
	if err := json.Unmarshal(s.b[start:end], &text); err != nil {
		return s.syntax("a bad string")
	}
	if text == "" {
		return nil
	}
	b, err := hex.DecodeString(text)
	if err != nil {
		return fmt.Errorf("%s %q is not hex", name, text)
	}
	if into != nil {
		*into = b
	}
	s.edits = append(s.edits, edit{start, end, `"` + base64.StdEncoding.EncodeToString(b) + `"`})
	return nil
}

func (s *jscan) resourceSpans() error {
	return s.object(func(key string) error {
		switch {
		case is(key, "resource", "resource"):
			return s.whole("resourceSpans.resource", func(c *spanCheck) error { return s.attributed(c, false) })
		case is(key, "scopeSpans", "scope_spans"):
			return s.array(func(int) error {
				return s.object(func(key string) error {
					switch {
					case is(key, "scope", "scope"):
						return s.whole("resourceSpans.scopeSpans.scope", func(c *spanCheck) error { return s.attributed(c, true) })
					case is(key, "spans", "spans"):
						return s.array(func(int) error { return s.span() })
					}
					return s.skip()
				})
			})
		}
		return s.skip()
	})
}

// whole runs check on a part of the request that is refused whole when
// it breaks a limit.
func (s *jscan) whole(path string, check func(c *spanCheck) error) error {
	c := &spanCheck{l: s.l}
	if err := check(c); err != nil {
		return err
	}
	if c.reason != "" {
		return &LimitError{Path: path, Message: c.reason}
	}
	return nil
}

// attributed scans an object with attributes (and a name and a version,
// a scope's, when named).
func (s *jscan) attributed(c *spanCheck, named bool) error {
	return s.object(func(key string) error {
		switch {
		case is(key, "attributes", "attributes"):
			return s.keyValues(c, "attributes", c.l.MaxAttributes, 0)
		case named && is(key, "name", "name"):
			return s.checkedString(c, "a name")
		case named && is(key, "version", "version"):
			return s.checkedString(c, "the scope's version")
		}
		return s.skip()
	})
}

// span scans one span; one past a limit is replaced by its ids.
func (s *jscan) span() error {
	if s.spans++; s.spans > s.l.MaxSpans {
		return &LimitError{TooLarge: true, Path: "resourceSpans.scopeSpans.spans",
			Message: fmt.Sprintf("the request holds more than %d spans (the server's limit); export smaller batches", s.l.MaxSpans)}
	}
	start, edits, used := s.i, len(s.edits), s.budget.used
	c := &spanCheck{l: s.l}
	err := s.object(func(key string) error {
		switch {
		case is(key, "traceId", "trace_id"):
			return s.id(key, &c.traceID)
		case is(key, "spanId", "span_id"):
			return s.id(key, &c.spanID)
		case is(key, "parentSpanId", "parent_span_id"):
			return s.id(key, nil)
		case is(key, "name", "name"):
			return s.checkedString(c, "the span's name")
		case is(key, "attributes", "attributes"):
			return s.keyValues(c, "attributes on the span", c.l.MaxAttributes, 0)
		case is(key, "events", "events"):
			return s.array(func(n int) error {
				if !c.count(n, c.l.MaxEvents, "events on the span") {
					return s.skip()
				}
				return s.object(func(key string) error {
					switch {
					case is(key, "attributes", "attributes"):
						return s.keyValues(c, "attributes on an event", c.l.MaxAttributes, 0)
					case is(key, "name", "name"):
						return s.checkedString(c, "an event's name")
					}
					return s.skip()
				})
			})
		case is(key, "links", "links"):
			return s.array(func(n int) error {
				if !c.count(n, c.l.MaxLinks, "links on the span") {
					return s.skip()
				}
				return s.object(func(key string) error {
					switch {
					case is(key, "traceId", "trace_id"), is(key, "spanId", "span_id"):
						return s.id(key, nil)
					case is(key, "attributes", "attributes"):
						return s.keyValues(c, "attributes on a link", c.l.MaxAttributes, 0)
					}
					return s.skip()
				})
			})
		}
		return s.skip()
	})
	if err != nil {
		return err
	}
	if c.reason != "" {
		s.edits = append(s.edits[:edits], edit{start, s.i, idsJSON(c)})
		s.refused = append(s.refused, RefusedSpan{Key: c.key(), Reason: c.reason})
		s.budget.used = used + 1 // only its ids are decoded
	}
	return s.budget.check()
}

// idsJSON is a refused span as handed to protojson: its ids alone.
func idsJSON(c *spanCheck) string {
	var parts []string
	if c.traceID != nil {
		parts = append(parts, `"traceId":"`+base64.StdEncoding.EncodeToString(c.traceID)+`"`)
	}
	if c.spanID != nil {
		parts = append(parts, `"spanId":"`+base64.StdEncoding.EncodeToString(c.spanID)+`"`)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// keyValues scans an array of KeyValue objects, at most limit of them,
// at value nesting depth.
func (s *jscan) keyValues(c *spanCheck, what string, limit, depth int) error {
	return s.array(func(n int) error {
		if !c.count(n, limit, what) {
			return s.skip()
		}
		return s.object(func(key string) error {
			switch {
			case is(key, "key", "key"):
				return s.checkedString(c, "an attribute key")
			case is(key, "value", "value"):
				return s.anyValue(c, depth)
			}
			return s.skip()
		})
	})
}

// anyValue scans an AnyValue object at value nesting depth.
func (s *jscan) anyValue(c *spanCheck, depth int) error {
	return s.object(func(key string) error {
		switch {
		case is(key, "stringValue", "string_value"), is(key, "bytesValue", "bytes_value"):
			return s.checkedString(c, "an attribute value")
		case is(key, "arrayValue", "array_value"), is(key, "kvlistValue", "kvlist_value"):
			kvlist := is(key, "kvlistValue", "kvlist_value")
			if !c.depth(depth + 1) {
				return s.skip()
			}
			return s.object(func(key string) error {
				if !is(key, "values", "values") {
					return s.skip()
				}
				if kvlist {
					return s.keyValues(c, "values in one key-value list", c.l.MaxArrayLength, depth+1)
				}
				return s.array(func(n int) error {
					if !c.count(n, c.l.MaxArrayLength, "values in one array") {
						return s.skip()
					}
					return s.anyValue(c, depth+1)
				})
			})
		}
		return s.skip()
	})
}
