package anticipate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentclock/clockwork/internal/errs"
)

// object is one JSON object being decoded strictly: keys are matched
// exactly (encoding/json would match struct fields case-insensitively,
// which would let a message's signed bytes and its meaning disagree), every
// value is type-checked, and every failure is recorded with its JSON path.
type object struct {
	path string
	m    map[string]json.RawMessage
	c    *errs.Collector
}

// decodeObject decodes raw as a JSON object at path. A null or absent value
// yields (nil, false) without an error when optional; otherwise a field
// error is recorded.
func decodeObject(c *errs.Collector, path string, raw json.RawMessage, required bool) (*object, bool) {
	if isNull(raw) {
		if required {
			c.Add(path, "is required")
		}
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		c.Add(path, "must be a JSON object")
		return nil, false
	}
	return &object{path: path, m: m, c: c}, true
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// at returns the path of a member.
func (o *object) at(key string) string {
	if o.path == "" {
		return key
	}
	return o.path + "." + key
}

// get returns the raw value of key, nil when absent or null.
func (o *object) get(key string) json.RawMessage {
	raw, ok := o.m[key]
	if !ok || isNull(raw) {
		return nil
	}
	return raw
}

// only records an error for every key not in allowed, in sorted order.
func (o *object) only(allowed ...string) {
	var unknown []string
	for k := range o.m {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		o.c.Add(o.at(k), "is not a known field")
	}
}

// str decodes a string member. It returns "" and records "is required"
// when required and absent, null or empty; it records an error when the
// value is not a string or is longer than max bytes.
func (o *object) str(key string, required bool, max int) string {
	raw := o.get(key)
	if raw == nil {
		if required {
			o.c.Add(o.at(key), "is required")
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		o.c.Add(o.at(key), "must be a string")
		return ""
	}
	if strings.TrimSpace(s) == "" {
		if required {
			o.c.Add(o.at(key), "is required")
		} else {
			o.c.Add(o.at(key), "must not be empty when present")
		}
		return ""
	}
	if len(s) > max {
		o.c.Add(o.at(key), "is longer than %d bytes", max)
		return ""
	}
	return s
}

// id decodes an identifier: a string of 1 to MaxIDLen bytes without
// control characters or leading or trailing white space.
func (o *object) id(key string, required bool) string {
	s := o.str(key, required, MaxIDLen)
	if s == "" {
		return ""
	}
	if msg := checkID(s); msg != "" {
		o.c.Add(o.at(key), "%s", msg)
		return ""
	}
	return s
}

// checkID returns "" for a valid identifier, else the reason.
func checkID(s string) string {
	switch {
	case s == "":
		return "is required"
	case len(s) > MaxIDLen:
		return fmt.Sprintf("is longer than %d bytes", MaxIDLen)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.TrimSpace(s) != s:
		return "has leading or trailing white space"
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "contains a control character"
		}
	}
	return ""
}

// number decodes a finite number member; ok is false when it is absent
// (recorded as required) or invalid (recorded).
func (o *object) number(key string) (float64, bool) {
	raw := o.get(key)
	if raw == nil {
		o.c.Add(o.at(key), "is required")
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		o.c.Add(o.at(key), "must be a finite number")
		return 0, false
	}
	return f, true
}

// unit decodes a required number in [0, 1].
func (o *object) unit(key string) (float64, bool) {
	f, ok := o.number(key)
	if !ok {
		return 0, false
	}
	if f < 0 || f > 1 {
		o.c.Add(o.at(key), "must be between 0 and 1 inclusive, got %v", f)
		return 0, false
	}
	return f, true
}

// boolean decodes a required boolean member.
func (o *object) boolean(key string) (bool, bool) {
	raw := o.get(key)
	if raw == nil {
		o.c.Add(o.at(key), "is required")
		return false, false
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		o.c.Add(o.at(key), "must be true or false")
		return false, false
	}
	return b, true
}

// array decodes an optional array member into its raw elements.
func (o *object) array(key string) ([]json.RawMessage, bool) {
	raw := o.get(key)
	if raw == nil {
		return nil, true
	}
	var a []json.RawMessage
	if err := json.Unmarshal(raw, &a); err != nil {
		o.c.Add(o.at(key), "must be an array")
		return nil, false
	}
	return a, true
}

// enum decodes a required string member that must be one of values.
func (o *object) enum(key string, values ...string) string {
	s := o.str(key, true, 64)
	if s == "" {
		return ""
	}
	for _, v := range values {
		if s == v {
			return s
		}
	}
	o.c.Add(o.at(key), "must be one of %s, got %q", strings.Join(values, ", "), s)
	return ""
}

// MaxExtraFields bounds the fields a message may carry beyond those the
// server interprets (at the top level of an execution event or an
// ANTICIPATE). Their values are bounded only by the limits on the whole
// message (body size, nesting, the store's item size).
const MaxExtraFields = 64

// extras checks the members of o that are not in known: fields the server
// does not interpret, kept verbatim in the message's raw bytes (and so
// covered by its digest) but never read. It records an error for a name
// that is not a valid identifier (1 to MaxIDLen bytes, no control
// characters), a name equal to a known one (or to one of also) but for
// letter case (a reader that matches names case-insensitively, as
// encoding/json does, would take it for that field, so the signed bytes and
// their meaning could disagree), and for more than MaxExtraFields of them.
// It returns their names, sorted.
func (o *object) extras(known []string, also ...string) []string {
	var names []string
	for k := range o.m {
		if !contains(known, k) && !contains(also, k) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		if msg := checkID(k); msg != "" {
			o.c.Add(o.at(truncate(k, 64)), "is not a known field, and as a field name it %s", msg)
			continue
		}
		for _, n := range append(append([]string(nil), known...), also...) {
			if strings.EqualFold(k, n) {
				o.c.Add(o.at(k), "is not a known field: it differs from %s only in letter case (field names match exactly)", n)
				break
			}
		}
	}
	if len(names) > MaxExtraFields {
		o.c.Add(o.path, "has %d fields the server does not interpret; at most %d are kept", len(names), MaxExtraFields)
	}
	return names
}

// enumFold decodes a required string member that must be one of values,
// matched without regard to letter case; it returns the value as listed
// in values.
func (o *object) enumFold(key string, values ...string) string {
	s := o.str(key, true, 64)
	if s == "" {
		return ""
	}
	for _, v := range values {
		if strings.EqualFold(s, v) {
			return v
		}
	}
	o.c.Add(o.at(key), "must be one of %s (any letter case), got %q", strings.Join(values, ", "), s)
	return ""
}

// onlyBecause is only, with the reason an unknown field is refused added
// to each error.
func (o *object) onlyBecause(reason string, allowed ...string) {
	before := len(o.c.List)
	o.only(allowed...)
	for i := before; i < len(o.c.List); i++ {
		o.c.List[i].Message += ": " + reason
	}
}
