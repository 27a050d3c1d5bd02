package assertion

import "strings"

// normalizeKeywords returns src with the words and, or, not, true and false
// written in any letter case replaced by their lower-case form, which expr
// understands. String literals (single, double or back quoted) and comments
// are left alone. Every replacement has the same length as the word it
// replaces, so byte offsets, and therefore error columns, are preserved.
// An unterminated string or comment is copied as is; expr reports it.
func normalizeKeywords(src string) string {
	var b []byte // allocated on the first change only
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\'' || c == '"':
			i = skipQuoted(src, i, c)
		case c == '`':
			if j := strings.IndexByte(src[i+1:], '`'); j >= 0 {
				i += j + 2
			} else {
				i = len(src)
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
				i += j + 1
			} else {
				i = len(src)
			}
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			if j := strings.Index(src[i+2:], "*/"); j >= 0 {
				i += j + 4
			} else {
				i = len(src)
			}
		case isIdentStart(c):
			j := i + 1
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			// A name after '.' is a member, not a keyword (x.And).
			if !(i > 0 && src[i-1] == '.') {
				word := src[i:j]
				if kw := keyword(word); kw != "" && kw != word {
					if b == nil {
						b = []byte(src)
					}
					copy(b[i:j], kw)
				}
			}
			i = j
		default:
			i++
		}
	}
	if b == nil {
		return src
	}
	return string(b)
}

// skipQuoted returns the index just past the string literal that starts at
// src[i] with quote q, honouring backslash escapes.
func skipQuoted(src string, i int, q byte) int {
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q:
			return j + 1
		}
	}
	return len(src)
}

func isIdentStart(c byte) bool {
	return c == '_' || c == '$' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || c >= 0x80
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || ('0' <= c && c <= '9')
}

// keyword returns the lower-case keyword that word spells in any letter
// case, or "".
func keyword(word string) string {
	if len(word) < 2 || len(word) > 5 {
		return ""
	}
	for _, kw := range [...]string{"and", "or", "not", "true", "false"} {
		if asciiEqualFold(word, kw) {
			return kw
		}
	}
	return ""
}

// asciiEqualFold reports whether s equals the lower-case ASCII word kw in
// ASCII letter case only (so a Unicode look-alike never matches and the
// replacement always has the same length).
func asciiEqualFold(s, kw string) bool {
	if len(s) != len(kw) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != kw[i] {
			return false
		}
	}
	return true
}
