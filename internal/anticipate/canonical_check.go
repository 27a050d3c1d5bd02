package anticipate

import (
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// isCanonical reports whether b is already its own RFC 8785 (JCS) form, in
// one pass that allocates nothing for plain keys: no insignificant
// whitespace; object members in strictly increasing order of their names'
// UTF-16 code units; strings in valid UTF-8 escaped exactly as JCS escapes
// them (\" \\ \b \f \n \r \t, other controls as \u00xx, nothing else);
// numbers exactly as ECMAScript writes the double they denote. Whatever it
// accepts, jcs.Transform returns unchanged (TestIsCanonicalAgreesWithJCS,
// FuzzIsCanonical); what it refuses, Canonical transforms. Events built
// by a program (OTLP ingest's) usually pass, and skip the transform.
func isCanonical(b []byte) bool {
	c := canonChecker{b: b}
	if !c.value(0) {
		return false
	}
	return c.i == len(b)
}

// maxCanonicalDepth is jcs's nesting bound: deeper input goes to the
// transform, which refuses it.
const maxCanonicalDepth = 10000

type canonChecker struct {
	b []byte
	i int
}

func (c *canonChecker) value(depth int) bool {
	if c.i >= len(c.b) {
		return false
	}
	switch ch := c.b[c.i]; {
	case ch == '{':
		return depth < maxCanonicalDepth && c.object(depth+1)
	case ch == '[':
		return depth < maxCanonicalDepth && c.array(depth+1)
	case ch == '"':
		_, _, ok := c.str()
		return ok
	case ch == 't':
		return c.lit("true")
	case ch == 'f':
		return c.lit("false")
	case ch == 'n':
		return c.lit("null")
	case ch == '-' || ch >= '0' && ch <= '9':
		return c.number()
	}
	return false
}

func (c *canonChecker) lit(s string) bool {
	if len(c.b)-c.i < len(s) || string(c.b[c.i:c.i+len(s)]) != s {
		return false
	}
	c.i += len(s)
	return true
}

func (c *canonChecker) array(depth int) bool {
	c.i++ // '['
	if c.i < len(c.b) && c.b[c.i] == ']' {
		c.i++
		return true
	}
	for {
		if !c.value(depth) {
			return false
		}
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return true
		default:
			return false
		}
	}
}

func (c *canonChecker) object(depth int) bool {
	c.i++ // '{'
	if c.i < len(c.b) && c.b[c.i] == '}' {
		c.i++
		return true
	}
	var prevStart, prevEnd int
	prevEscaped, first := false, true
	for {
		if c.i >= len(c.b) || c.b[c.i] != '"' {
			return false
		}
		start := c.i + 1
		end, escaped, ok := c.str()
		if !ok {
			return false
		}
		if !first && compareKeys(c.b[prevStart:prevEnd], prevEscaped, c.b[start:end], escaped) >= 0 {
			return false // out of order, or twice
		}
		prevStart, prevEnd, prevEscaped, first = start, end, escaped, false
		if c.i >= len(c.b) || c.b[c.i] != ':' {
			return false
		}
		c.i++
		if !c.value(depth) {
			return false
		}
		if c.i >= len(c.b) {
			return false
		}
		switch c.b[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			return true
		default:
			return false
		}
	}
}

// str checks a string at c.i (its opening quote) and returns where its
// content ends (before the closing quote) and whether it holds escapes.
func (c *canonChecker) str() (end int, escaped, ok bool) {
	c.i++ // '"'
	for c.i < len(c.b) {
		ch := c.b[c.i]
		switch {
		case ch == '"':
			end = c.i
			c.i++
			return end, escaped, true
		case ch == '\\':
			escaped = true
			if c.i+1 >= len(c.b) {
				return 0, false, false
			}
			switch c.b[c.i+1] {
			case '"', '\\', 'b', 'f', 'n', 'r', 't':
				c.i += 2
			case 'u':
				// Only the controls without a short form, lowercase.
				if c.i+6 > len(c.b) || c.b[c.i+2] != '0' || c.b[c.i+3] != '0' {
					return 0, false, false
				}
				v, err := strconv.ParseUint(string(c.b[c.i+4:c.i+6]), 16, 8)
				if err != nil || v >= 0x20 || !isLowerHex(c.b[c.i+4]) || !isLowerHex(c.b[c.i+5]) {
					return 0, false, false
				}
				switch v {
				case '\b', '\f', '\n', '\r', '\t':
					return 0, false, false
				}
				c.i += 6
			default:
				return 0, false, false
			}
		case ch < 0x20:
			return 0, false, false
		case ch < utf8.RuneSelf:
			c.i++
		default:
			r, size := utf8.DecodeRune(c.b[c.i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false, false
			}
			c.i += size
		}
	}
	return 0, false, false
}

func isLowerHex(b byte) bool { return b >= '0' && b <= '9' || b >= 'a' && b <= 'f' }

// number checks a number at c.i: valid JSON, and written as ECMAScript
// writes the double it denotes.
func (c *canonChecker) number() bool {
	start := c.i
	if c.b[c.i] == '-' {
		c.i++
	}
	digits := func() int {
		n := 0
		for c.i < len(c.b) && c.b[c.i] >= '0' && c.b[c.i] <= '9' {
			c.i++
			n++
		}
		return n
	}
	if c.i < len(c.b) && c.b[c.i] == '0' {
		c.i++
	} else if digits() == 0 {
		return false
	}
	if c.i < len(c.b) && c.b[c.i] == '.' {
		c.i++
		if digits() == 0 {
			return false
		}
	}
	if c.i < len(c.b) && (c.b[c.i] == 'e' || c.b[c.i] == 'E') {
		c.i++
		if c.i < len(c.b) && (c.b[c.i] == '+' || c.b[c.i] == '-') {
			c.i++
		}
		if digits() == 0 {
			return false
		}
	}
	tok := string(c.b[start:c.i])
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return false
	}
	s, err := jcs.NumberToJSON(f)
	return err == nil && s == tok
}

// compareKeys compares two member names (string contents as written) by
// their UTF-16 code units, as JCS sorts them.
func compareKeys(a []byte, aEsc bool, b []byte, bEsc bool) int {
	if aEsc {
		a = unescapeCanonical(a)
	}
	if bEsc {
		b = unescapeCanonical(b)
	}
	for len(a) > 0 && len(b) > 0 {
		ra, na := utf8.DecodeRune(a)
		rb, nb := utf8.DecodeRune(b)
		if ra == rb {
			a, b = a[na:], b[nb:]
			continue
		}
		ua, ub := firstUnit(ra), firstUnit(rb)
		if ua != ub {
			return int(ua) - int(ub)
		}
		// Same high surrogate: the low ones decide.
		return int(secondUnit(ra)) - int(secondUnit(rb))
	}
	return len(a) - len(b)
}

func firstUnit(r rune) uint16 {
	if r >= 0x10000 {
		return uint16(0xD800 + ((r - 0x10000) >> 10))
	}
	return uint16(r)
}

func secondUnit(r rune) uint16 {
	if r >= 0x10000 {
		return uint16(0xDC00 + ((r - 0x10000) & 0x3FF))
	}
	return 0
}

// unescapeCanonical decodes the escapes str accepts.
func unescapeCanonical(s []byte) []byte {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			v, _ := strconv.ParseUint(string(s[i+1:i+5]), 16, 8)
			out = append(out, byte(v))
			i += 4
		default:
			out = append(out, s[i])
		}
	}
	return out
}
