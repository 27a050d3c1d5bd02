// Package jsonwalk checks what encoding/json lets through silently: strings
// (member names and values) that are not valid UTF-8, or hold an unpaired
// surrogate escape, which the decoder replaces with U+FFFD; and objects
// with two member names equal but for letter case, of which the decoder
// keeps one by its own rule while another reader (a console, a person)
// may read the other. Each check names the JSON path of what it found,
// in the notation of the API's field errors (facts[0].factKey).
package jsonwalk

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// InvalidString returns the path of the first string in the JSON document
// b that is not valid UTF-8 or holds an unpaired surrogate escape. A
// malformed document is left to the decoder: found is false.
func InvalidString(b []byte) (path string, found bool) {
	if utf8.Valid(b) && !bytes.Contains(b, []byte(`\u`)) {
		return "", false // nearly every request
	}
	walk(b, func(w *walker, lit []byte, _ string, _ bool) bool {
		if !validLiteral(lit) {
			path, found = w.path(), true
			return false
		}
		return true
	})
	return path, found
}

// CaseVariantKey returns the path of the first member whose name equals
// an earlier member name of the same object but for letter case (or
// exactly), and that earlier name. A malformed document: found is false.
func CaseVariantKey(b []byte) (path, other string, found bool) {
	walk(b, func(w *walker, _ []byte, s string, isKey bool) bool {
		if !isKey {
			return true
		}
		f := &w.stack[len(w.stack)-1]
		folded := strings.ToLower(s)
		if prev, ok := f.names[folded]; ok {
			path, other, found = w.path(), prev, true
			return false
		}
		if f.names == nil {
			f.names = map[string]string{}
		}
		f.names[folded] = s
		return true
	})
	return path, other, found
}

// PathAt returns the path of the value of the JSON document b that ends at
// byte offset (or the first one ending after it): where encoding/json's
// UnmarshalTypeError.Offset points. Unlike that error's Field, the path
// names array indexes and never the Go name of an embedded struct. found
// is false past the document's end.
func PathAt(b []byte, offset int64) (path string, found bool) {
	walkValues(b, func(w *walker, end int64) bool {
		if end >= offset {
			path, found = w.path(), true
			return false
		}
		return true
	})
	return path, found
}

// walkValues calls visit with the path and end offset of every value of b
// (scalars when read, objects and arrays when opened), until visit returns
// false or the document ends or turns out malformed.
func walkValues(b []byte, visit func(w *walker, end int64) bool) {
	w := &walker{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			w.stack = w.stack[:len(w.stack)-1]
			if n := len(w.stack); n > 0 && w.stack[n-1].obj {
				w.stack[n-1].wantKey = true
			}
			continue
		}
		if n := len(w.stack); n > 0 && w.stack[n-1].obj && w.stack[n-1].wantKey {
			w.stack[n-1].key, w.stack[n-1].wantKey = tok.(string), false
			continue
		}
		if n := len(w.stack); n > 0 && !w.stack[n-1].obj {
			w.stack[n-1].idx++
		}
		if !visit(w, dec.InputOffset()) {
			return
		}
		if d, ok := tok.(json.Delim); ok {
			w.stack = append(w.stack, frame{obj: d == '{', idx: -1, wantKey: d == '{'})
			continue
		}
		if n := len(w.stack); n > 0 && w.stack[n-1].obj {
			w.stack[n-1].wantKey = true
		}
	}
}

type frame struct {
	obj     bool
	key     string
	idx     int
	wantKey bool
	names   map[string]string // CaseVariantKey's lower-cased names
}

type walker struct{ stack []frame }

// path is the location of the current token.
func (w *walker) path() string {
	var b strings.Builder
	for _, f := range w.stack {
		if f.obj {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		} else {
			b.WriteString("[" + strconv.Itoa(f.idx) + "]")
		}
	}
	return b.String()
}

// walk calls visit with every string of b (member names with isKey), its
// quoted literal as written and its decoded value, until visit returns
// false or the document ends or turns out malformed.
func walk(b []byte, visit func(w *walker, lit []byte, s string, isKey bool) bool) {
	w := &walker{}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	prev := int64(0)
	for {
		tok, err := dec.Token()
		if err != nil {
			return
		}
		raw := b[prev:dec.InputOffset()]
		prev = dec.InputOffset()
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			w.stack = w.stack[:len(w.stack)-1]
			if n := len(w.stack); n > 0 && w.stack[n-1].obj {
				w.stack[n-1].wantKey = true
			}
			continue
		}
		s, isStr := tok.(string)
		if n := len(w.stack); n > 0 && w.stack[n-1].obj && w.stack[n-1].wantKey {
			w.stack[n-1].key, w.stack[n-1].wantKey = s, false
			if !visit(w, literal(raw), s, true) {
				return
			}
			continue
		}
		if n := len(w.stack); n > 0 && !w.stack[n-1].obj {
			w.stack[n-1].idx++
		}
		if d, ok := tok.(json.Delim); ok {
			w.stack = append(w.stack, frame{obj: d == '{', idx: -1, wantKey: d == '{'})
			continue
		}
		if isStr && !visit(w, literal(raw), s, false) {
			return
		}
		if n := len(w.stack); n > 0 && w.stack[n-1].obj {
			w.stack[n-1].wantKey = true
		}
	}
}

// literal cuts the separators (',', ':', white space) that precede a
// string token's literal.
func literal(raw []byte) []byte {
	if i := bytes.IndexByte(raw, '"'); i >= 0 {
		return raw[i:]
	}
	return raw
}

// validLiteral reports whether a quoted JSON string literal is valid UTF-8
// with every surrogate escape in a valid pair.
func validLiteral(lit []byte) bool {
	if !utf8.Valid(lit) {
		return false
	}
	for i := 0; i < len(lit); i++ {
		if lit[i] != '\\' {
			continue
		}
		i++
		if i >= len(lit) || lit[i] != 'u' || i+4 >= len(lit) {
			continue
		}
		r1, _ := strconv.ParseUint(string(lit[i+1:i+5]), 16, 32)
		i += 4
		if !utf16.IsSurrogate(rune(r1)) {
			continue
		}
		if r1 >= 0xDC00 || i+6 >= len(lit) || lit[i+1] != '\\' || lit[i+2] != 'u' {
			return false
		}
		r2, _ := strconv.ParseUint(string(lit[i+3:i+7]), 16, 32)
		if utf16.DecodeRune(rune(r1), rune(r2)) == utf8.RuneError {
			return false
		}
		i += 6
	}
	return true
}
