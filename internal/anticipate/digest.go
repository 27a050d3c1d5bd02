package anticipate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/agentclock/clockwork/internal/errs"
	"github.com/gowebpki/jcs"
)

// DigestPrefix starts every digest and d_dna_signature.
const DigestPrefix = "sha256:"

// SignatureField is the top-level field that carries a message's own
// digest; it is left out of the bytes it covers.
const SignatureField = "d_dna_signature"

// ServerSignatureField is the optional top-level Ed25519 signature of a
// VERIFY. It signs the VERIFY without itself and SignatureField, and
// SignatureField then covers it (see SignEd25519).
const ServerSignatureField = "server_signature"

// GenesisDigest is the "previous digest" of a plan's first execution event.
// It is the empty string, so an execution chain does not depend on which or
// how many anticipations are bound to it.
const GenesisDigest = ""

// signatureHelp tells a client how to compute d_dna_signature.
const signatureHelp = `must be "sha256:" followed by the 64 lowercase hex digits of the SHA-256 ` +
	`of the RFC 8785 (JCS) canonical JSON of the whole message with the d_dna_signature ` +
	`field removed`

// Canonical returns the RFC 8785 (JCS) canonical form of a JSON document.
// It returns an errs.Invalid error for input that is not a single JSON
// value, has duplicate object keys, invalid UTF-8, lone surrogates or
// numbers outside the IEEE 754 double range.
func Canonical(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, errs.E(errs.Invalid, "body is empty")
	}
	// A document that is canonical already (as a program writes one) is
	// its own form: one allocation-free pass instead of the transform.
	if isCanonical(raw) {
		return append([]byte(nil), raw...), nil
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, errs.E(errs.Invalid, "body is not valid JSON for RFC 8785 canonicalization: %s", err.Error())
	}
	return out, nil
}

// canonicalWithout returns the JCS form of the JSON object raw without the
// named top-level fields.
func canonicalWithout(raw []byte, fields ...string) ([]byte, error) {
	canon, err := Canonical(raw)
	if err != nil {
		return nil, err
	}
	if len(canon) == 0 || canon[0] != '{' {
		return nil, errs.E(errs.Invalid, "body must be a JSON object")
	}
	return stripTopLevel(canon, fields...), nil
}

// stripTopLevel removes the named members from the top-level object of a
// canonical (compact, valid) JSON object and returns the result, which is
// still canonical: removing members keeps the others in order. Field names
// must be plain ASCII without characters JCS escapes.
func stripTopLevel(canon []byte, fields ...string) []byte {
	out := make([]byte, 0, len(canon))
	out = append(out, '{')
	i := 1 // after '{'
	first := true
	for i < len(canon) && canon[i] != '}' {
		start := i
		// The key: a string from canon[i] == '"'.
		keyEnd := skipString(canon, i)
		key := canon[i+1 : keyEnd-1]
		// The value: from after ':' to the ',' or '}' at depth 0.
		j := keyEnd + 1
		depth := 0
	value:
		for j < len(canon) {
			switch canon[j] {
			case '"':
				j = skipString(canon, j)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					break value
				}
				depth--
			case ',':
				if depth == 0 {
					break value
				}
			}
			j++
		}
		drop := false
		for _, f := range fields {
			if string(key) == f {
				drop = true
				break
			}
		}
		if !drop {
			if !first {
				out = append(out, ',')
			}
			out = append(out, canon[start:j]...)
			first = false
		}
		i = j
		if i < len(canon) && canon[i] == ',' {
			i++
		}
	}
	return append(out, '}')
}

// skipString returns the index just past the JSON string starting at
// b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// digestBytes returns "sha256:" + lowercase hex SHA-256 of b.
func digestBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// Digest returns the d_dna_signature a message must carry: "sha256:" and
// the lowercase hex SHA-256 of the RFC 8785 canonical JSON of the JSON
// object raw with its top-level d_dna_signature removed, and nothing else
// (the seed's rule). The same function gives the digest of an ANTICIPATE
// (its anticipation_digest) and the d_dna_signature of a VERIFY exactly as
// it is returned, server_signature included. It returns an
// errs.Invalid error when raw is not a canonicalizable JSON object.
func Digest(raw []byte) (string, error) {
	canon, err := canonicalWithout(raw, SignatureField)
	if err != nil {
		return "", err
	}
	return digestBytes(canon), nil
}

// DigestOf encodes v with encoding/json and returns Digest of the result.
// It returns an errs.Invalid error when v cannot be encoded (a NaN, a
// channel) or does not encode to a JSON object.
func DigestOf(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", errs.E(errs.Invalid, "value cannot be encoded as JSON: %s", err.Error())
	}
	return Digest(raw)
}

// Sign returns the JSON object raw, in RFC 8785 canonical form, with its
// top-level d_dna_signature set to Digest(raw) (replacing any value it
// had). Clients and tests use it to produce a valid ANTICIPATE. It returns
// an errs.Invalid error when raw is not a canonicalizable JSON object.
func Sign(raw []byte) ([]byte, error) {
	d, err := Digest(raw)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errs.E(errs.Invalid, "body must be a JSON object")
	}
	m[SignatureField], _ = json.Marshal(d)
	out, err := json.Marshal(m)
	if err != nil {
		return nil, errs.E(errs.Invalid, "body must be a JSON object")
	}
	return Canonical(out)
}

// checkSignature compares a message's d_dna_signature with its digest and
// returns "" when it matches, else a message for the field error. canon is
// the canonical form of the message, which must be a JSON object.
func checkSignature(canon []byte, got string) string {
	want := digestBytes(stripTopLevel(canon, SignatureField))
	switch {
	case got == "":
		return "is required and " + signatureHelp
	case !validDigestForm(got):
		return "is not of the form sha256:<64 lowercase hex digits>; it " + signatureHelp
	case got != want:
		return "does not match the message content; it " + signatureHelp
	}
	return ""
}

// validDigestForm reports whether s is "sha256:" and 64 lowercase hex
// digits.
func validDigestForm(s string) bool {
	h, ok := strings.CutPrefix(s, DigestPrefix)
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// ChainDigest returns the digest of an execution event in its plan's chain:
// "sha256:" and the lowercase hex SHA-256 of the UTF-8 bytes of prev (the
// previous event's digest, or GenesisDigest for the first event) followed
// by the RFC 8785 canonical JSON of eventRaw. It returns "" when eventRaw
// cannot be canonicalized; validate events with ValidateEvent first.
func ChainDigest(prev string, eventRaw []byte) string {
	canon, err := jcs.Transform(eventRaw)
	if err != nil || len(eventRaw) == 0 {
		return ""
	}
	return ChainDigestCanonical(prev, canon)
}

// ChainDigestCanonical is ChainDigest of an event given in its RFC 8785
// form already (Event.Canonical).
func ChainDigestCanonical(prev string, canon []byte) string {
	h := sha256.New()
	h.Write([]byte(prev))
	h.Write(canon)
	return DigestPrefix + hex.EncodeToString(h.Sum(nil))
}

// VerifyChain recomputes the chain over events from GenesisDigest and
// compares it with digests, the digest stored with each event. It returns
// (-1, true) when every digest matches and the lengths agree; otherwise the
// index of the first event whose stored digest is wrong or missing (or, when
// there are more digests than events, the index of the first extra digest)
// and false. A tampered event, a reordering or a removal breaks every
// digest from that point on.
func VerifyChain(events [][]byte, digests []string) (badIndex int, ok bool) {
	prev := GenesisDigest
	for i, ev := range events {
		if i >= len(digests) {
			return i, false
		}
		d := ChainDigest(prev, ev)
		if d == "" || d != digests[i] {
			return i, false
		}
		prev = d
	}
	if len(digests) != len(events) {
		return len(events), false
	}
	return -1, true
}
