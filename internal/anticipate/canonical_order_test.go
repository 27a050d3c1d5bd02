package anticipate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// jsonNames lists the JSON member names (with their options) of a struct
// type's fields, sorted.
func jsonNames(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		out = append(out, f.Tag.Get("json")+" "+f.Type.Kind().String())
	}
	slices.Sort(out)
	return out
}

// TestCanonicalOrderMirrorsTheTypes: the mirrors hold exactly the members
// of Verification and Result (name, options, kind), and in JCS order. A
// member added to Verification or Result without its mirror would be left
// out of the digest: this fails first.
func TestCanonicalOrderMirrorsTheTypes(t *testing.T) {
	for _, c := range []struct{ real, mirror reflect.Type }{
		{reflect.TypeFor[Verification](), reflect.TypeFor[verificationInOrder]()},
		{reflect.TypeFor[Result](), reflect.TypeFor[resultInOrder]()},
	} {
		if a, b := jsonNames(c.real), jsonNames(c.mirror); !slices.Equal(a, b) {
			t.Errorf("%s has members %v, its mirror %s %v", c.real, a, c.mirror, b)
		}
		var names []string
		for f := range c.mirror.Fields() {
			names = append(names, strings.Split(f.Tag.Get("json"), ",")[0])
		}
		if !slices.IsSorted(names) {
			t.Errorf("%s's members are not in JCS order: %v", c.mirror, names)
		}
	}
}

// TestVerifyCanonicalIsJCS: the canonical bytes of a VERIFY (every
// optional member set, text JCS and encoding/json escape differently)
// are what jcs makes of the VERIFY as encoding/json writes it, and are
// taken as canonical without the transform.
func TestVerifyCanonicalIsJCS(t *testing.T) {
	score, zero := 0.75, 0.0
	v := &Verification{ProtocolVersion: "4.1", MessageType: "VERIFY", VerificationID: "vrf-1", AnticipationID: "ant <1> & co", PlanID: "plan-é",
		SessionID: "s", AgentID: "a", AppID: "app", Timestamp: "2026-12-06T09:00:00Z", Score: 0.861111, PassingThreshold: 0.7,
		AntiCriteriaFailed: []string{"ac-1"}, Verdict: VerdictPass, AnticipationDigest: "sha256:ab", ExecutionDigest: "sha256:cd",
		DDNASignature: "sha256:ef", ServerSignature: "ed25519:xyz",
		Results: []Result{
			{CriterionID: "oc-1", Category: "outcome", Measurement: "HEURISTIC", Weight: 1, Status: StatusPass, Score: &score,
				Evidence: "user_exists(alice) == true <ok>\u2028\n\t\"q\"", GradedBy: "model:judge", Rationale: "fine 😀", PromptDigest: "sha256:01"},
			{CriterionID: "tc-1", Category: "trajectory", Measurement: "DETERMINISTIC", Weight: 0.5, Status: StatusFail, Score: &zero, Evidence: "step_count 4", GradedBy: "code"},
			{CriterionID: "h-1", Category: "outcome", Measurement: "HUMAN", Weight: 1e-7, Status: StatusPending, Evidence: "pending: awaiting a reviewer"},
		},
	}
	for _, without := range [][]string{nil, {SignatureField}, {SignatureField, ServerSignatureField}} {
		got, err := verifyCanonical(v, without...)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(v)
		want, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		want = stripTopLevel(want, without...)
		if !bytes.Equal(got, want) {
			t.Fatalf("without %v:\n got %s\nwant %s", without, got, want)
		}
	}
	// encoding/json escapes U+2028 (JCS does not): such a VERIFY goes
	// through the transform, with the same bytes as above; any other is
	// canonical as written.
	plain := *v
	plain.Results = slices.Clone(v.Results)
	plain.Results[0].Evidence = "user_exists(alice) == true <ok>\n\t\"q\" é"
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(canonicalOrder(&plain))
	if !isCanonical(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))) {
		t.Fatalf("the VERIFY in canonical order is not taken as canonical: %s", buf.Bytes())
	}
}
