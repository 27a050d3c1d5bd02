package otlpin

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentclock/clockwork/internal/httpapi"
)

// Limits bound what one export request may hold. They are checked on the
// wire, before anything is decoded, so that a body's memory cost is bounded
// by its size whatever its compression ratio: a span past a per-span limit
// is refused (named in the answer's partial success) and never decoded; a
// request past MaxSpans, or whose resource or scope breaks a limit, is
// refused whole. OpenTelemetry SDKs keep 128 attributes, events and links
// per span by default, so their exports fit.
type Limits struct {
	// MaxSpans bounds the spans of one request (413 past it).
	MaxSpans int
	// MaxAttributes bounds the attributes of a span, a span event, a link,
	// a resource or a scope.
	MaxAttributes int
	// MaxEvents and MaxLinks bound a span's events and links.
	MaxEvents, MaxLinks int
	// MaxValueBytes bounds one string or bytes value as sent (an attribute
	// value or key, a span or event name).
	MaxValueBytes int
	// MaxArrayLength bounds the values of one array or key-value list
	// attribute value.
	MaxArrayLength int
	// MaxDepth bounds the nesting of array and key-value list values.
	MaxDepth int
	// MaxElements bounds what the request decodes into, all of it: each
	// message (protobuf) or object and array value (JSON), known to OTLP or
	// not, counts one (413 past it); a span refused for a limit counts only
	// its ids. Each costs up to about 100 bytes decoded however few bytes
	// it takes on the wire (an empty attribute: 2), so this bounds a
	// request's memory whatever it holds. A span of 20 attributes is about
	// 50 elements.
	MaxElements int
}

// DefaultLimits are the limits of a server that sets none.
func DefaultLimits() Limits {
	return Limits{MaxSpans: 5000, MaxAttributes: 128, MaxEvents: 128, MaxLinks: 128,
		MaxValueBytes: 256 << 10, MaxArrayLength: 1024, MaxDepth: 8, MaxElements: 500_000}
}

// withDefaults fills the limits left zero.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	for _, p := range []struct{ v, d *int }{{&l.MaxSpans, &d.MaxSpans}, {&l.MaxAttributes, &d.MaxAttributes}, {&l.MaxEvents, &d.MaxEvents},
		{&l.MaxLinks, &d.MaxLinks}, {&l.MaxValueBytes, &d.MaxValueBytes}, {&l.MaxArrayLength, &d.MaxArrayLength}, {&l.MaxDepth, &d.MaxDepth}, {&l.MaxElements, &d.MaxElements}} {
		if *p.v <= 0 {
			*p.v = *p.d
		}
	}
	return l
}

// maxJSONDepth bounds the nesting of an OTLP JSON body as a whole (its own
// structure is 12 levels deep, values add 3 per level of MaxDepth).
func (l Limits) maxJSONDepth() int { return 16 + 3*l.MaxDepth }

// LimitError is a request refused whole by a limit: TooLarge says 413
// (too many spans) rather than 400.
type LimitError struct {
	TooLarge bool
	// Path names where, as OTLP JSON names it.
	Path, Message string
}

func (e *LimitError) Error() string { return e.Path + ": " + e.Message }

// TextError is an OTLP JSON request whose text is not valid: bytes that
// are not UTF-8, or a surrogate escape out of its pair (JSON text is
// UTF-8; decoders would store replacement characters).
type TextError struct {
	// Path names the first such string.
	Path string
}

func (e *TextError) Error() string {
	return e.Path + ": is not valid UTF-8 (or holds an unpaired surrogate escape)"
}

// RefusedSpan is a span refused before decoding: its key (trace id / span
// id, hex; empty when it had none readable) and why.
type RefusedSpan struct {
	Key, Reason string
}

// spanCheck collects what one span's walk finds: the first limit broken,
// and its ids.
type spanCheck struct {
	l               Limits
	reason          string
	traceID, spanID []byte
}

// budget counts the elements a request decodes into (Limits.MaxElements).
// A scan that allocates nothing per element may count past the budget and
// check it later (check), so that the elements of a span it then refuses
// (and will not decode) are given back (used is set back).
type budget struct{ used, max int }

// spend counts one element. Errors: a *LimitError past the budget.
func (b *budget) spend() error {
	b.used++
	return b.check()
}

// check returns a *LimitError when more than the budget is used.
func (b *budget) check() error {
	if b.used > b.max {
		return &LimitError{TooLarge: true, Path: "body", Message: fmt.Sprintf(
			"the request decodes into more than %d elements (messages, objects, array values; the server's limit); export smaller batches", b.max)}
	}
	return nil
}

func (c *spanCheck) fail(format string, a ...any) {
	if c.reason == "" {
		c.reason = fmt.Sprintf(format, a...)
	}
}

func (c *spanCheck) value(n int, what string) {
	if n > c.l.MaxValueBytes && c.reason == "" {
		c.fail("%s is over %d bytes (the server's limit)", what, c.l.MaxValueBytes)
	}
}

func (c *spanCheck) count(n, limit int, what string) bool {
	if n > limit {
		if c.reason == "" { // (fail's arguments would allocate for each)
			c.fail("more than %d %s (the server's limit)", limit, what)
		}
		return false
	}
	return true
}

func (c *spanCheck) depth(d int) bool {
	if d > c.l.MaxDepth {
		c.fail("values nested more than %d deep (the server's limit)", c.l.MaxDepth)
		return false
	}
	return true
}

// key names the span as Map does (trace id / span id, hex; "/" for a span
// without ids), so that a refused span is counted once.
func (c *spanCheck) key() string {
	return fmt.Sprintf("%x/%x", c.traceID, c.spanID)
}

// Bounds of the request itself and of the exports taken at once, which
// httpapi enforces (see httpapi.TracesLimits).
type Bounds = httpapi.TracesLimits

// Config is what an operator sets of OTLP ingest: the request's bounds and
// the limits of what it holds.
type Config struct {
	Bounds
	Limits
}

// DefaultConfig is the configuration of a server that sets none.
func DefaultConfig() Config {
	return Config{Bounds: httpapi.DefaultTracesLimits(), Limits: DefaultLimits()}
}

// settings names each setting once: its flag (-otlp-<name>), its
// environment variable on AWS (OTLP_<NAME>) and what it bounds.
func (c *Config) settings() []setting {
	return []setting{
		{"max-body", &c.Body, "bytes of one export request as sent (413 past it)"},
		{"max-decompressed", &c.Decompressed, "bytes of one export request decompressed (413 past it)"},
		{"concurrent-exports", &c.Concurrent, "export requests decoded at once; the others wait up to 5 s, then get 429 with Retry-After"},
		{"max-spans", &c.MaxSpans, "spans in one export request (413 past it)"},
		{"max-attributes", &c.MaxAttributes, "attributes of a span, span event, link, resource or scope (a span past it is refused in the partial success)"},
		{"max-events", &c.MaxEvents, "events of a span"},
		{"max-links", &c.MaxLinks, "links of a span"},
		{"max-value-bytes", &c.MaxValueBytes, "bytes of one string or bytes value, attribute key or name"},
		{"max-array", &c.MaxArrayLength, "values of one array or key-value list attribute value"},
		{"max-depth", &c.MaxDepth, "nesting of array and key-value list attribute values"},
		{"max-elements", &c.MaxElements, "what one request decodes into: each protobuf message or JSON object and array value counts one (about 50 for a span of 20 attributes; 413 past it)"},
	}
}

type setting struct {
	name string
	v    *int
	doc  string
}

// RegisterFlags registers -otlp-<setting> flags on fs, defaulting to c.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	for _, s := range c.settings() {
		fs.IntVar(s.v, "otlp-"+s.name, *s.v, "OTLP ingest: "+s.doc)
	}
}

// FromEnv sets what the environment names (OTLP_MAX_SPANS and so on, each
// a positive integer). Errors name the variable.
func (c *Config) FromEnv(getenv func(string) string) error {
	for _, s := range c.settings() {
		name := "OTLP_" + strings.ToUpper(strings.ReplaceAll(s.name, "-", "_"))
		v := getenv(name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("%s=%q: must be a positive integer", name, v)
		}
		*s.v = n
	}
	return nil
}
