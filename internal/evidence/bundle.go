// Package evidence is the evidence bundle of a VERIFY: one JSON document
// holding the sealed ANTICIPATE as declared, every execution event as
// received with its chain position, the VERIFY and the server's public
// key, so that a third party can check the grading offline. The server
// writes it with Writer (GET /v1/verifications/{id}/bundle); Check, used by
// cmd/clockwork-verify, recomputes every digest and signature and
// re-grades every DETERMINISTIC criterion from it.
//
// The document:
//
//	{"bundle": "clockwork-evidence/1",
//	 "anticipation": {ANTICIPATE},
//	 "verification": {VERIFY},
//	 "public_key": {"alg": "Ed25519", "public_key": "<base64url>"} or null,
//	 "events": [{"seq": 1, "prev": "", "digest": "sha256:…", "event": {…}}, …]}
//
// Every member is checked; an unknown member is refused. The checks read
// the JSON values, never the bytes: RFC 8785 (JCS) canonical forms are
// what the digests cover, so white space, member order and equivalent
// escapes (\u00e9 and \u00E9) change nothing a digest covers and are not
// tampering.
package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Format names the bundle's layout; Check refuses any other value.
const Format = "clockwork-evidence/1"

// KeyAlg is the only public key algorithm of a bundle.
const KeyAlg = "Ed25519"

// PublicKey is the VERIFY signing key, as GET /v1/keys/verify returns it.
type PublicKey struct {
	Alg       string `json:"alg"`        // always "Ed25519"
	PublicKey string `json:"public_key"` // unpadded base64url of the 32-byte key
}

// Event is one execution event with its position in the plan's chain.
type Event struct {
	Seq    int             `json:"seq"`    // 1 for the first event of the plan
	Prev   string          `json:"prev"`   // the previous event's digest; "" for the first
	Digest string          `json:"digest"` // ChainDigest(prev, event)
	Event  json.RawMessage `json:"event"`  // the event as received
}

// Bundle is a decoded bundle. Check decodes it itself; this type is for
// tools and tests that build or edit one.
type Bundle struct {
	Format       string          `json:"bundle"`
	Anticipation json.RawMessage `json:"anticipation"`
	Verification json.RawMessage `json:"verification"`
	PublicKey    *PublicKey      `json:"public_key"`
	Events       []Event         `json:"events"`
}

// Writer streams a bundle to an io.Writer: the head first (NewWriter),
// then each event (Event), then Close. It holds one event at a time, so a
// bundle of any number of events is written in constant memory.
type Writer struct {
	w      *bufio.Writer
	events int
	err    error
}

// NewWriter writes the bundle's head: the format, the ANTICIPATE and the
// VERIFY (each a JSON object, written compacted but otherwise as given)
// and key (nil when the server does not sign). It returns an error when
// either message is not valid JSON or the write fails.
func NewWriter(w io.Writer, anticipation, verification json.RawMessage, key *PublicKey) (*Writer, error) {
	bw := &Writer{w: bufio.NewWriterSize(w, 64<<10)}
	bw.str(`{"bundle":"` + Format + `","anticipation":`)
	bw.compact("anticipation", anticipation)
	bw.str(`,"verification":`)
	bw.compact("verification", verification)
	bw.str(`,"public_key":`)
	if key == nil {
		bw.str("null")
	} else {
		b, _ := json.Marshal(key)
		bw.raw(b)
	}
	bw.str(`,"events":[`)
	return bw, bw.err
}

// Event writes the next event. It returns the first error of any write so
// far, or an error when ev.Event is not valid JSON.
func (w *Writer) Event(ev Event) error {
	if w.events > 0 {
		w.str(",")
	}
	w.events++
	head, _ := json.Marshal(struct {
		Seq    int    `json:"seq"`
		Prev   string `json:"prev"`
		Digest string `json:"digest"`
	}{ev.Seq, ev.Prev, ev.Digest})
	w.raw(head[:len(head)-1])
	w.str(`,"event":`)
	w.compact("event", ev.Event)
	w.str("}")
	return w.err
}

// Close ends the document and flushes it. It returns the first error of
// any write.
func (w *Writer) Close() error {
	w.str("]}\n")
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Flush sends what is buffered (between pages of events).
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

func (w *Writer) str(s string) {
	if w.err == nil {
		_, w.err = w.w.WriteString(s)
	}
}

func (w *Writer) raw(b []byte) {
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

// compact writes a JSON value without insignificant white space. Unlike
// encoding/json it does not rewrite <, > and & as escapes: the value stays
// byte for byte as stored.
func (w *Writer) compact(what string, v json.RawMessage) {
	if w.err != nil {
		return
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil || b.Len() == 0 {
		w.err = fmt.Errorf("evidence: the %s is not valid JSON", what)
		return
	}
	w.raw(b.Bytes())
}
