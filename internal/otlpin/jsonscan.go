package otlpin

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// filterJSON checks an OTLP JSON request against l as it scans it once,
// byte by byte, allocating nothing per value. It returns the body for
// protojson: the trace and span ids rewritten from OTLP JSON's hex to the
// base64 protobuf JSON expects, and each span past a limit replaced by its
// ids alone; and the spans so refused. Errors: a *LimitError for the
// request as a whole; a syntax error naming the offset.
func filterJSON(body []byte, l Limits) ([]byte, []RefusedSpan, error) {
	s := &jscan{b: body, l: l, budget: &budget{max: l.MaxElements}}
	s.ws()
	if err := s.object(func(key string) error {
		if norm(key) == "resourcespans" {
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
}

// edit replaces b[start:end] in the body handed to protojson.
type edit struct {
	start, end int
	repl       string
}

// norm is a member name as compared here: protojson takes a field's JSON
// name (traceId) and its proto name (trace_id).
func norm(key string) string { return strings.ToLower(strings.ReplaceAll(key, "_", "")) }

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
// scan at its value, which member must consume. A value that is not an
// object is skipped (protojson reports it).
func (s *jscan) object(member func(key string) error) error {
	s.ws()
	if s.peek() != '{' {
		return s.skip()
	}
	if err := s.enter(); err != nil {
		return err
	}
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
		key := string(s.b[start+1 : end-1])
		if strings.IndexByte(key, '\\') >= 0 {
			if err := json.Unmarshal(s.b[start:end], &key); err != nil {
				return s.syntax("a bad member name")
			}
		}
		s.ws()
		if s.peek() != ':' {
			return s.syntax("a missing ':'")
		}
		s.i++
		s.ws()
		if err := member(key); err != nil {
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

// str scans a string and returns its bounds, quotes included.
func (s *jscan) str() (int, int, error) {
	if s.peek() != '"' {
		return 0, 0, s.syntax("a missing string")
	}
	start := s.i
	s.i++
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return start, s.i, nil
		case c == '\\':
			s.i += 2
		case c < 0x20:
			return 0, 0, s.syntax("a control character in a string")
		default:
			s.i++
		}
	}
	return 0, 0, s.syntax("an unterminated string")
}

// skip scans any value.
func (s *jscan) skip() error {
	s.ws()
	switch c := s.peek(); {
	case c == '{':
		return s.object(func(string) error { return s.skip() })
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
		switch norm(key) {
		case "resource":
			return s.whole("resourceSpans.resource", func(c *spanCheck) error { return s.attributed(c, "") })
		case "scopespans":
			return s.array(func(int) error {
				return s.object(func(key string) error {
					switch norm(key) {
					case "scope":
						return s.whole("resourceSpans.scopeSpans.scope", func(c *spanCheck) error { return s.attributed(c, "name") })
					case "spans":
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
	c := &spanCheck{l: s.l, budget: s.budget}
	if err := check(c); err != nil {
		return err
	}
	if c.reason != "" {
		return &LimitError{Path: path, Message: c.reason}
	}
	return nil
}

// attributed scans an object with attributes (and a name, when named).
func (s *jscan) attributed(c *spanCheck, named string) error {
	return s.object(func(key string) error {
		switch k := norm(key); {
		case k == "attributes":
			return s.keyValues(c, "attributes", c.l.MaxAttributes, 0)
		case named != "" && k == named:
			return s.checkedString(c, "a name")
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
	if err := s.budget.spend(); err != nil {
		return err
	}
	start, edits := s.i, len(s.edits)
	c := &spanCheck{l: s.l, budget: s.budget}
	err := s.object(func(key string) error {
		switch norm(key) {
		case "traceid":
			return s.id(key, &c.traceID)
		case "spanid":
			return s.id(key, &c.spanID)
		case "parentspanid":
			return s.id(key, nil)
		case "name":
			return s.checkedString(c, "the span's name")
		case "attributes":
			return s.keyValues(c, "attributes on the span", c.l.MaxAttributes, 0)
		case "events":
			return s.array(func(n int) error {
				if !c.count(n, c.l.MaxEvents, "events on the span") {
					return s.skip()
				}
				if err := s.budget.spend(); err != nil {
					return err
				}
				return s.attributed(c, "name")
			})
		case "links":
			return s.array(func(n int) error {
				if !c.count(n, c.l.MaxLinks, "links on the span") {
					return s.skip()
				}
				if err := s.budget.spend(); err != nil {
					return err
				}
				return s.object(func(key string) error {
					switch norm(key) {
					case "traceid", "spanid":
						return s.id(key, nil)
					case "attributes":
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
	}
	return nil
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
		if err := s.budget.spend(); err != nil {
			return err
		}
		return s.object(func(key string) error {
			switch norm(key) {
			case "key":
				return s.checkedString(c, "an attribute key")
			case "value":
				return s.anyValue(c, depth)
			}
			return s.skip()
		})
	})
}

// anyValue scans an AnyValue object at value nesting depth.
func (s *jscan) anyValue(c *spanCheck, depth int) error {
	return s.object(func(key string) error {
		switch k := norm(key); k {
		case "stringvalue", "bytesvalue":
			return s.checkedString(c, "an attribute value")
		case "arrayvalue", "kvlistvalue":
			if !c.depth(depth + 1) {
				return s.skip()
			}
			return s.object(func(key string) error {
				if norm(key) != "values" {
					return s.skip()
				}
				if k == "kvlistvalue" {
					return s.keyValues(c, "values in one key-value list", c.l.MaxArrayLength, depth+1)
				}
				return s.array(func(n int) error {
					if !c.count(n, c.l.MaxArrayLength, "values in one array") {
						return s.skip()
					}
					if err := s.budget.spend(); err != nil {
						return err
					}
					return s.anyValue(c, depth+1)
				})
			})
		}
		return s.skip()
	})
}
