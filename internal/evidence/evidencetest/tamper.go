package evidencetest

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evidence"
	"github.com/gowebpki/jcs"
)

// Checker is the verifier under test: evidence.Check, or the command.
type Checker func(bundle []byte, opt evidence.Options) *evidence.Report

// Tampering is one way to change a bundle, and the link a verifier must
// name as the first broken one (a prefix of Finding.Link).
type Tampering struct {
	Name string
	// Edit changes the decoded bundle in place.
	Edit func(d *Doc)
	// Signed and Unsigned are the links expected on a bundle whose VERIFY
	// is signed and on one whose is not; "" means the case does not apply.
	Signed, Unsigned string
}

// Doc is a decoded bundle being tampered with. Numbers stay as written.
type Doc struct {
	M map[string]any
	t testing.TB
}

// Decode decodes a bundle for tampering.
func Decode(t testing.TB, b []byte) *Doc {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("decode bundle: %v", err)
	}
	return &Doc{M: m, t: t}
}

// Bytes encodes the document.
func (d *Doc) Bytes() []byte {
	b, err := json.Marshal(d.M)
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

func (d *Doc) obj(key string) map[string]any { return d.M[key].(map[string]any) }

// Anticipation, Verification and Events give the bundle's parts.
func (d *Doc) Anticipation() map[string]any { return d.obj("anticipation") }

// Verification returns the VERIFY.
func (d *Doc) Verification() map[string]any { return d.obj("verification") }

// Events returns the event entries.
func (d *Doc) Events() []any { return d.M["events"].([]any) }

// Entry returns event entry i.
func (d *Doc) Entry(i int) map[string]any { return d.Events()[i].(map[string]any) }

// Inner returns the event of entry i.
func (d *Doc) Inner(i int) map[string]any { return d.Entry(i)["event"].(map[string]any) }

// Middle returns the index of an event that has others after it, a
// TOOL_REQUEST when there is one.
func (d *Doc) Middle() int {
	evs := d.Events()
	for i := range evs[:len(evs)-1] {
		if _, ok := d.Inner(i)["tool"]; ok && d.Inner(i)[TypeField] == "TOOL_REQUEST" {
			return i
		}
	}
	return len(evs) / 2
}

func (d *Doc) marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		d.t.Fatal(err)
	}
	return b
}

// Renumber sets every entry's seq to its position.
func (d *Doc) Renumber() {
	for i := range d.Events() {
		d.Entry(i)["seq"] = json.Number(fmt.Sprint(i + 1))
	}
}

// Rechain recomputes prev and digest of every entry from index from on,
// as someone who tampers and knows the rule would.
func (d *Doc) Rechain(from int) {
	prev := anticipate.GenesisDigest
	if from > 0 {
		prev = d.Entry(from - 1)["digest"].(string)
	}
	for i := from; i < len(d.Events()); i++ {
		dg := anticipate.ChainDigest(prev, d.marshal(d.Inner(i)))
		d.Entry(i)["prev"], d.Entry(i)["digest"] = prev, dg
		prev = dg
	}
}

// Head returns the last entry's digest.
func (d *Doc) Head() string { return d.Entry(len(d.Events()) - 1)["digest"].(string) }

// ResignAnticipation recomputes the ANTICIPATE's d_dna_signature.
func (d *Doc) ResignAnticipation() {
	a := d.Anticipation()
	dg, err := anticipate.Digest(d.marshal(a))
	if err != nil {
		d.t.Fatal(err)
	}
	a["d_dna_signature"] = dg
}

// Reseal recomputes the VERIFY's d_dna_signature (the seed's rule).
func (d *Doc) Reseal() {
	v := d.Verification()
	dg, err := anticipate.Digest(d.marshal(v))
	if err != nil {
		d.t.Fatal(err)
	}
	v["d_dna_signature"] = dg
}

// Resign signs the VERIFY with key and reseals it, and puts key's public
// half in the bundle.
func (d *Doc) Resign(key ed25519.PrivateKey) {
	v := d.Verification()
	msg, err := anticipate.VerifySignedBytes(d.marshal(v))
	if err != nil {
		d.t.Fatal(err)
	}
	v["server_signature"] = "ed25519:" + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, msg))
	d.M["public_key"] = map[string]any{"alg": "Ed25519", "public_key": base64.RawURLEncoding.EncodeToString(key.Public().(ed25519.PublicKey))}
	d.Reseal()
}

func (d *Doc) result(i int) map[string]any {
	return d.Verification()["results"].([]any)[i].(map[string]any)
}

func flipLastHex(s string) string {
	last := s[len(s)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return s[:len(s)-1] + string(repl)
}

// Tamperings returns every kind of tampering: the ANTICIPATE edited, an
// event edited, removed, reordered or inserted (with and without the
// digests recomputed after it), a digest, seq or prev edited, the VERIFY's
// score, status or verdict edited (with and without its d_dna_signature
// recomputed), the signature edited or removed, the key swapped or removed,
// and the bundle's own members changed.
func Tamperings() []Tampering {
	editEvent := func(d *Doc) {
		k := d.Middle()
		if _, ok := d.Inner(k)["tool"]; ok {
			d.Inner(k)["tool"] = "iam_remove_user"
		} else {
			d.Inner(k)["event_id"] = "ev-edited"
		}
	}
	injected := map[string]any{"event_id": "ev-injected", TypeField: "ESCALATION", "timestamp": "2026-06-24T10:00:02Z"}
	return []Tampering{
		{Name: "anticipation edited", Edit: func(d *Doc) {
			d.Anticipation()["grading_policy"].(map[string]any)["passing_threshold"] = json.Number("0.1")
		},
			Signed: "anticipation", Unsigned: "anticipation"},
		{Name: "anticipation edited and its d_dna_signature recomputed", Edit: func(d *Doc) {
			d.Anticipation()["grading_policy"].(map[string]any)["passing_threshold"] = json.Number("0.1")
			d.ResignAnticipation()
		}, Signed: "verification.anticipation_digest", Unsigned: "verification.anticipation_digest"},
		{Name: "anticipation edited, VERIFY made to follow and resealed", Edit: func(d *Doc) {
			d.Anticipation()["grading_policy"].(map[string]any)["passing_threshold"] = json.Number("0.1")
			d.ResignAnticipation()
			d.Verification()["anticipation_digest"] = d.Anticipation()["d_dna_signature"]
			d.Verification()["passing_threshold"] = json.Number("0.1")
			d.Reseal()
		}, Signed: "verification.server_signature", Unsigned: "verification.verification_id"},
		{Name: "event edited", Edit: editEvent, Signed: "events[", Unsigned: "events["},
		{Name: "event edited and its digest recomputed", Edit: func(d *Doc) {
			editEvent(d)
			k := d.Middle()
			d.Entry(k)["digest"] = anticipate.ChainDigest(d.Entry(k)["prev"].(string), d.marshal(d.Inner(k)))
		}, Signed: "events[", Unsigned: "events["},
		{Name: "event edited and the chain recomputed", Edit: func(d *Doc) { editEvent(d); d.Rechain(0) },
			Signed: "verification.execution_digest", Unsigned: "verification.execution_digest"},
		{Name: "event edited, chain recomputed, VERIFY made to follow and resealed", Edit: func(d *Doc) {
			editEvent(d)
			d.Rechain(0)
			d.Verification()["execution_digest"] = d.Head()
			d.Reseal()
		}, Signed: "verification.server_signature", Unsigned: "verification.results["},
		{Name: "event removed", Edit: func(d *Doc) {
			k := d.Middle()
			d.M["events"] = append(append([]any{}, d.Events()[:k]...), d.Events()[k+1:]...)
		}, Signed: "events[", Unsigned: "events["},
		{Name: "event removed and the rest renumbered", Edit: func(d *Doc) {
			k := d.Middle()
			d.M["events"] = append(append([]any{}, d.Events()[:k]...), d.Events()[k+1:]...)
			d.Renumber()
		}, Signed: "events[", Unsigned: "events["},
		{Name: "event removed and the chain recomputed", Edit: func(d *Doc) {
			k := d.Middle()
			d.M["events"] = append(append([]any{}, d.Events()[:k]...), d.Events()[k+1:]...)
			d.Renumber()
			d.Rechain(0)
		}, Signed: "verification.execution_digest", Unsigned: "verification.execution_digest"},
		{Name: "last event removed", Edit: func(d *Doc) { d.M["events"] = d.Events()[:len(d.Events())-1] },
			Signed: "events[", Unsigned: "events["},
		{Name: "events reordered", Edit: func(d *Doc) {
			k := d.Middle()
			e := d.Events()
			e[k], e[k+1] = e[k+1], e[k]
		}, Signed: "events[", Unsigned: "events["},
		{Name: "events reordered and renumbered", Edit: func(d *Doc) {
			k := d.Middle()
			e := d.Events()
			e[k], e[k+1] = e[k+1], e[k]
			d.Renumber()
		}, Signed: "events[", Unsigned: "events["},
		{Name: "events reordered and the chain recomputed", Edit: func(d *Doc) {
			k := d.Middle()
			e := d.Events()
			e[k], e[k+1] = e[k+1], e[k]
			d.Renumber()
			d.Rechain(0)
		}, Signed: "verification.execution_digest", Unsigned: "verification.execution_digest"},
		{Name: "event inserted (a copy)", Edit: func(d *Doc) {
			k := d.Middle()
			e := d.Events()
			d.M["events"] = append(append(append([]any{}, e[:k+1]...), e[k]), e[k+1:]...)
		}, Signed: "events[", Unsigned: "events["},
		{Name: "event inserted, renumbered and the chain recomputed", Edit: func(d *Doc) {
			k := d.Middle()
			e := d.Events()
			d.M["events"] = append(append(append([]any{}, e[:k]...), map[string]any{"seq": json.Number("0"), "prev": "", "digest": "", "event": injected}), e[k:]...)
			d.Renumber()
			d.Rechain(0)
		}, Signed: "verification.execution_digest", Unsigned: "verification.execution_digest"},
		{Name: "event digest edited", Edit: func(d *Doc) { e := d.Entry(d.Middle()); e["digest"] = flipLastHex(e["digest"].(string)) },
			Signed: "events[", Unsigned: "events["},
		{Name: "event seq edited", Edit: func(d *Doc) { d.Entry(d.Middle())["seq"] = json.Number("99999") },
			Signed: "events[", Unsigned: "events["},
		{Name: "event prev edited", Edit: func(d *Doc) {
			e := d.Entry(d.Middle() + 1)
			e["prev"] = flipLastHex(e["prev"].(string))
		}, Signed: "events[", Unsigned: "events["},
		{Name: "first event prev null", Edit: func(d *Doc) { d.Entry(0)["prev"] = nil }, Signed: "events[0].prev", Unsigned: "events[0].prev"},
		{Name: "event member added", Edit: func(d *Doc) { d.Entry(d.Middle())["note"] = "x" }, Signed: "events[", Unsigned: "events["},
		{Name: "VERIFY execution_digest edited", Edit: func(d *Doc) {
			d.Verification()["execution_digest"] = flipLastHex(d.Verification()["execution_digest"].(string))
		}, Signed: "verification.execution_digest", Unsigned: "verification.execution_digest"},
		{Name: "VERIFY anticipation_digest edited", Edit: func(d *Doc) {
			d.Verification()["anticipation_digest"] = flipLastHex(d.Verification()["anticipation_digest"].(string))
		}, Signed: "verification.anticipation_digest", Unsigned: "verification.anticipation_digest"},
		{Name: "VERIFY d_dna_signature edited", Edit: func(d *Doc) {
			d.Verification()["d_dna_signature"] = flipLastHex(d.Verification()["d_dna_signature"].(string))
		}, Signed: "verification.d_dna_signature", Unsigned: "verification.d_dna_signature"},
		{Name: "VERIFY score edited", Edit: func(d *Doc) { d.Verification()["score"] = json.Number("0.5") },
			Signed: "verification.d_dna_signature", Unsigned: "verification.d_dna_signature"},
		{Name: "VERIFY score edited and resealed", Edit: func(d *Doc) { d.Verification()["score"] = json.Number("0.5"); d.Reseal() },
			Signed: "verification.server_signature", Unsigned: "verification.score"},
		{Name: "VERIFY verdict edited", Edit: func(d *Doc) { flipVerdict(d.Verification()) },
			Signed: "verification.d_dna_signature", Unsigned: "verification.d_dna_signature"},
		{Name: "VERIFY verdict edited and resealed", Edit: func(d *Doc) { flipVerdict(d.Verification()); d.Reseal() },
			Signed: "verification.server_signature", Unsigned: "verification.verdict"},
		{Name: "VERIFY result status edited", Edit: func(d *Doc) { flipStatus(d.result(0)) },
			Signed: "verification.d_dna_signature", Unsigned: "verification.d_dna_signature"},
		{Name: "VERIFY result status edited and resealed", Edit: func(d *Doc) { flipStatus(d.result(0)); d.Reseal() },
			Signed: "verification.server_signature", Unsigned: "verification.results[0]"},
		{Name: "VERIFY result evidence edited and resealed", Edit: func(d *Doc) { d.result(0)["evidence"] = "trust me"; d.Reseal() },
			Signed: "verification.server_signature", Unsigned: "verification.results[0]"},
		{Name: "server_signature edited", Edit: func(d *Doc) {
			d.Verification()["server_signature"] = flipSig(d.Verification()["server_signature"].(string))
		}, Signed: "verification.d_dna_signature"},
		{Name: "server_signature edited and resealed", Edit: func(d *Doc) {
			d.Verification()["server_signature"] = flipSig(d.Verification()["server_signature"].(string))
			d.Reseal()
		}, Signed: "verification.server_signature"},
		{Name: "server_signature removed and resealed", Edit: func(d *Doc) { delete(d.Verification(), "server_signature"); d.Reseal() },
			Signed: "verification.server_signature"},
		{Name: "public key swapped", Edit: func(d *Doc) {
			_, other, _ := ed25519.GenerateKey(nil)
			d.M["public_key"] = map[string]any{"alg": "Ed25519", "public_key": base64.RawURLEncoding.EncodeToString(other.Public().(ed25519.PublicKey))}
		}, Signed: "verification.server_signature", Unsigned: "verification.server_signature"},
		{Name: "public key removed", Edit: func(d *Doc) { d.M["public_key"] = nil }, Signed: "verification.server_signature"},
		{Name: "public key algorithm edited", Edit: func(d *Doc) {
			d.M["public_key"] = map[string]any{"alg": "Ed448", "public_key": "AAAA"}
		}, Signed: "public_key", Unsigned: "public_key"},
		{Name: "bundle format edited", Edit: func(d *Doc) { d.M["bundle"] = "clockwork-evidence/2" }, Signed: "bundle", Unsigned: "bundle"},
		{Name: "bundle member added", Edit: func(d *Doc) { d.M["note"] = "trust me" }, Signed: "bundle", Unsigned: "bundle"},
	}
}

func flipVerdict(v map[string]any) {
	if v["verdict"] == "PASS" {
		v["verdict"] = "FAIL"
	} else {
		v["verdict"] = "PASS"
	}
}

func flipStatus(r map[string]any) {
	if r["status"] == "PASS" {
		r["status"], r["score"] = "FAIL", json.Number("0")
	} else {
		r["status"], r["score"] = "PASS", json.Number("1")
	}
}

func flipSig(s string) string {
	b := []byte(s)
	i := len("ed25519:") + 3
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// Suite checks a verifier on a good bundle: it accepts the bundle, the
// bundle re-indented and with its members reordered, and the bundle with
// the server's own key pinned; it refuses every Tampering naming the
// expected first broken link, refuses a bundle re-signed with another key
// when the server's key is pinned, and refuses every single-byte change
// (at most maxOffsets offsets, spread over the bundle, each XOR 0x01 and
// XOR 0x20) unless the change leaves the JSON values as they were (the
// RFC 8785 canonical form of the whole bundle is unchanged), in which case
// it must still accept.
func Suite(t *testing.T, bundle []byte, check Checker, maxOffsets int) {
	t.Helper()
	if rep := check(bundle, evidence.Options{}); !rep.OK() {
		t.Fatalf("the verifier refuses a good bundle: %+v", *rep.FirstBroken())
	}
	d := Decode(t, bundle)
	signed := d.M["public_key"] != nil
	var pinned evidence.Options
	if signed {
		pk, _ := base64.RawURLEncoding.DecodeString(d.M["public_key"].(map[string]any)["public_key"].(string))
		pinned.TrustedKey = pk
		if rep := check(bundle, pinned); !rep.OK() {
			t.Fatalf("the verifier refuses a good bundle with its key pinned: %+v", *rep.FirstBroken())
		}
	}
	var indented bytes.Buffer
	_ = json.Indent(&indented, bundle, "", "\t")
	for name, b := range map[string][]byte{"re-indented": indented.Bytes(), "members reordered": d.Bytes()} {
		if rep := check(b, evidence.Options{}); !rep.OK() {
			t.Errorf("%s: white space and member order are not tampering, but the verifier says %+v", name, *rep.FirstBroken())
		}
	}

	for _, tc := range Tamperings() {
		want := tc.Unsigned
		if signed {
			want = tc.Signed
		}
		if want == "" {
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			d := Decode(t, bundle)
			tc.Edit(d)
			b := d.Bytes()
			rep := check(b, evidence.Options{})
			first := rep.FirstBroken()
			if first == nil {
				t.Fatalf("accepted a tampered bundle")
			}
			if !strings.HasPrefix(first.Link, want) {
				t.Fatalf("first broken link %q (%s), want %q", first.Link, first.Detail, want)
			}
		})
	}

	if signed {
		t.Run("key swapped and VERIFY re-signed with it", func(t *testing.T) {
			d := Decode(t, bundle)
			// The content is unchanged: only the signer is another.
			_, other, _ := ed25519.GenerateKey(nil)
			d.Resign(other)
			b := d.Bytes()
			if rep := check(b, pinned); rep.OK() || !strings.HasPrefix(rep.FirstBroken().Link, "public_key") {
				t.Fatalf("with the server's key pinned, a bundle re-signed with another key must fail at public_key: %+v", rep.Findings)
			}
			// Unpinned, a re-signed bundle whose content is intact checks:
			// the key in a bundle proves integrity, not identity.
			if rep := check(b, evidence.Options{}); !rep.OK() {
				t.Fatalf("unpinned: %+v", *rep.FirstBroken())
			}
		})
	}

	t.Run("single bytes changed", func(t *testing.T) {
		canon, err := jcs.Transform(bundle)
		if err != nil {
			t.Fatal(err)
		}
		stride := 1
		if maxOffsets > 0 && len(bundle) > maxOffsets {
			stride = (len(bundle) + maxOffsets - 1) / maxOffsets
		}
		// Spread offsets, plus every byte of every \u escape (where a
		// change of letter case leaves the value as it was).
		offsets := map[int]bool{}
		for off := 0; off < len(bundle); off += stride {
			offsets[off] = true
		}
		for i := 0; i+6 <= len(bundle); i++ {
			if bundle[i] == '\\' && bundle[i+1] == 'u' {
				for j := i + 2; j < i+6; j++ {
					offsets[j] = true
				}
			}
		}
		refused, same := 0, 0
		for off := range offsets {
			for _, x := range []byte{0x01, 0x20} {
				b := append([]byte(nil), bundle...)
				b[off] ^= x
				rep := check(b, evidence.Options{})
				if c, err := jcs.Transform(b); err == nil && bytes.Equal(c, canon) {
					same++
					if !rep.OK() {
						t.Errorf("offset %d ^%#x leaves every value as it was, but the verifier says %+v", off, x, *rep.FirstBroken())
					}
					continue
				}
				refused++
				if rep.OK() {
					t.Errorf("offset %d ^%#x (%q -> %q) changes the bundle, and the verifier accepted it", off, x, bundle[off], b[off])
				}
			}
		}
		t.Logf("%d single-byte changes refused, %d that leave every value as it was accepted (%d offsets of %d bytes)", refused, same, len(offsets), len(bundle))
	})
}
