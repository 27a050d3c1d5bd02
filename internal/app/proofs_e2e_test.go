package app

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/awsclient"
	"github.com/agentclock/clockwork/internal/evidence"
	"github.com/agentclock/clockwork/internal/evidence/evidencetest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/gowebpki/jcs"
)

// putSigningKeyParameter stores testSigningKey's seed, hex, in an SSM
// SecureString on the emulator (as the deployed stack's
// SIGNING_KEY_PARAMETER holds it) and returns the parameter's name.
func putSigningKeyParameter(t *testing.T, table string) string {
	t.Helper()
	ac, err := awsclient.Config(context.Background(), emulatorEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	name := "/clockwork/test/" + table + "/verify-signing-key"
	_, err = ssm.NewFromConfig(ac).PutParameter(context.Background(), &ssm.PutParameterInput{
		Name: aws.String(name), Type: ssmtypes.ParameterTypeSecureString, Overwrite: aws.Bool(true),
		Value: aws.String(hex.EncodeToString(testSigningKey.Seed())),
	})
	if err != nil {
		t.Fatalf("put the signing key in SSM: %v", err)
	}
	return name
}

// seedRuleHolds checks a VERIFY exactly as the HTTP API returned it,
// computing the seed's rule here rather than with package anticipate:
// d_dna_signature is "sha256:" + hex SHA-256 of the JCS form of the whole
// message without d_dna_signature only; server_signature, when pub is not
// nil, is an Ed25519 signature of the JCS form without both fields. With
// pub nil the message must carry no server_signature.
func seedRuleHolds(t *testing.T, raw []byte, pub ed25519.PublicKey) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("VERIFY is not a JSON object: %v: %s", err, raw)
	}
	var dDNA string
	if err := json.Unmarshal(m["d_dna_signature"], &dDNA); err != nil {
		t.Fatalf("d_dna_signature: %v", err)
	}
	canonical := func(m map[string]json.RawMessage) []byte {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		c, err := jcs.Transform(b)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	delete(m, "d_dna_signature")
	sum := sha256.Sum256(canonical(m))
	if want := "sha256:" + hex.EncodeToString(sum[:]); dDNA != want {
		t.Fatalf("d_dna_signature %s, the seed's rule over the VERIFY as returned gives %s", dDNA, want)
	}
	sigRaw, signed := m["server_signature"]
	if pub == nil {
		if signed {
			t.Fatalf("a server without a key returned server_signature %s", sigRaw)
		}
		return
	}
	if !signed {
		t.Fatal("a server with a key returned no server_signature")
	}
	var sig string
	if err := json.Unmarshal(sigRaw, &sig); err != nil {
		t.Fatal(err)
	}
	enc, ok := strings.CutPrefix(sig, "ed25519:")
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if !ok || err != nil {
		t.Fatalf("server_signature %q is not ed25519:<base64url>", sig)
	}
	delete(m, "server_signature")
	if !ed25519.Verify(pub, canonical(m), b) {
		t.Fatal("server_signature does not verify over the VERIFY without both fields")
	}
}

// scenarioVerifyFollowsTheSeedAsReturned checks the VERIFY's
// d_dna_signature and server_signature against the seed's rule applied to
// the JSON the API returns, with and without a server key, after grading
// and after a human grade re-signs it.
func scenarioVerifyFollowsTheSeedAsReturned(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		name := "signed"
		if !keyed {
			name = "unsigned"
		}
		t.Run(name, func(t *testing.T) {
			e := startEnv(t, func(c *Config) { c.NoSigningKey = !keyed })
			body := variant(t, "ant-proof", "plan-proof", func(m map[string]any) {
				m["grading_policy"].(map[string]any)["grader_type"] = "COMPOSITE"
				ex := m["expectations"].(map[string]any)
				ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{
					"criterion_id": "oc-h", "description": "A reviewer confirms the welcome email", "measurement": "HUMAN",
					"assertion": "The welcome email is correct", "weight": 0.5})
			})
			e.must(201, e.call("POST", "/v1/anticipations", body))
			runPlan(t, e, "plan-proof", 3, nil, allGood())
			v := e.waitVerification("ant-proof")
			var pub ed25519.PublicKey
			if keyed {
				var key struct {
					Alg       string `json:"alg"`
					PublicKey string `json:"public_key"`
				}
				e.must(200, e.call("GET", "/v1/keys/verify", nil)).json(t, &key)
				b, err := base64.RawURLEncoding.DecodeString(key.PublicKey)
				if err != nil || key.Alg != "Ed25519" || len(b) != ed25519.PublicKeySize {
					t.Fatalf("key %+v: %v", key, err)
				}
				pub = b
			} else {
				problem(t, e.must(404, e.call("GET", "/v1/keys/verify", nil)))
			}
			seedRuleHolds(t, e.must(200, e.call("GET", "/v1/verifications/"+v.VerificationID, nil)).body, pub)
			var list struct {
				Verifications []json.RawMessage `json:"verifications"`
			}
			e.must(200, e.call("GET", "/v1/anticipations/ant-proof/verifications", nil)).json(t, &list)
			for _, raw := range list.Verifications {
				seedRuleHolds(t, raw, pub)
			}
			// A human grade changes the VERIFY; it is signed and sealed again.
			graded := e.must(200, e.call("POST", "/v1/verifications/"+v.VerificationID+"/grades", map[string]any{"criterion_id": "oc-h", "score": 1, "rationale": "checked"}))
			seedRuleHolds(t, graded.body, pub)
			var g anticipate.Verification
			graded.json(t, &g)
			if g.Verdict != anticipate.VerdictPass || g.DDNASignature == v.DDNASignature {
				t.Fatalf("graded VERIFY: %+v", g)
			}
			again := e.must(200, e.call("GET", "/v1/verifications/"+v.VerificationID, nil))
			seedRuleHolds(t, again.body, pub)
			if keyed {
				if err := anticipate.VerifyEd25519(&g, pub); err != nil {
					t.Fatalf("package anticipate disagrees with the seed's rule: %v", err)
				}
			}
		})
	}
}

// scenarioEvidenceBundleVerifiesOffline fetches the evidence bundle of a
// graded VERIFY (a HUMAN grade re-signed it; one criterion reads the
// watcher), with and without a server key, and runs the offline verifier
// on it: it must accept the bundle as served and refuse every tampering.
func scenarioEvidenceBundleVerifiesOffline(t *testing.T) {
	for _, keyed := range []bool{true, false} {
		name := "signed"
		if !keyed {
			name = "unsigned"
		}
		t.Run(name, func(t *testing.T) {
			e := startEnv(t, func(c *Config) { c.NoSigningKey = !keyed })
			registerAs(t, e, seedAgent)
			body := variant(t, "ant-bundle", "plan-bundle", func(m map[string]any) {
				m["grading_policy"].(map[string]any)["grader_type"] = "COMPOSITE"
				ex := m["expectations"].(map[string]any)
				ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{
					"criterion_id": "oc-h", "description": "A reviewer confirms the welcome email", "measurement": "HUMAN",
					"assertion": "The welcome email is correct", "weight": 0.5})
				ex["trajectory_criteria"] = append(ex["trajectory_criteria"].([]any), map[string]any{
					"criterion_id": "tc-w", "description": "No lapses", "measurement": "DETERMINISTIC",
					"assertion": "lapse_count() == 0", "weight": 0.2})
				m["x_emitter_trace"] = "trace-7" // kept and signed
			})
			e.must(201, e.call("POST", "/v1/anticipations", body))
			// An emitter's own context fields and a lower-case status.
			e.must(202, e.call("POST", "/v1/executions/plan-bundle/events", event("pre-req", "TOOL_REQUEST", "tool", "iam_lookup",
				"arguments", map[string]any{"q": "<alice & co>"}, "trace_id", "t-1", "cost", map[string]any{"usd": 0.0012})))
			e.must(202, e.call("POST", "/v1/executions/plan-bundle/events", event("pre-res", "TOOL_RESULT", "tool", "iam_lookup", "status", "success", "model", "m-1")))
			runPlan(t, e, "plan-bundle", 4, []string{"iam_create_user", "iam_add_to_group"}, allGood())
			v := e.waitVerification("ant-bundle")
			path := "/v1/verifications/" + v.VerificationID + "/bundle"
			e.must(200, e.call("POST", "/v1/verifications/"+v.VerificationID+"/grades", map[string]any{"criterion_id": "oc-h", "score": 0.75, "rationale": "fine"}))

			bundle := e.must(200, e.call("GET", path, nil, readerToken)).body
			// Another agent's VERIFY answers as an unknown one.
			problem(t, e.must(404, e.call("GET", path, nil, otherToken)))
			problem(t, e.must(404, e.call("GET", "/v1/verifications/vrf-unknown/bundle", nil)))
			rep := evidence.Check(bundle, evidence.Options{})
			if !rep.OK() {
				t.Fatalf("the offline verifier refuses the server's bundle: %+v", rep.Findings)
			}
			if rep.Events != 2+4*3+2 || rep.Regraded != 5 || !strings.Contains(strings.Join(rep.Notes, "\n"), "tc-w reads the watcher") {
				t.Fatalf("report: %d events, %d re-graded, notes %q", rep.Events, rep.Regraded, rep.Notes)
			}
			// The bundle holds the VERIFY as GET returns it and the key as
			// /v1/keys/verify gives it.
			var b struct {
				Verification json.RawMessage `json:"verification"`
				PublicKey    json.RawMessage `json:"public_key"`
			}
			if err := json.Unmarshal(bundle, &b); err != nil {
				t.Fatal(err)
			}
			var got, want any
			_ = json.Unmarshal(b.Verification, &got)
			_ = json.Unmarshal(e.must(200, e.call("GET", "/v1/verifications/"+v.VerificationID, nil)).body, &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatal("the bundle's VERIFY is not the one GET returns")
			}
			if keyed {
				var k1, k2 any
				_ = json.Unmarshal(b.PublicKey, &k1)
				_ = json.Unmarshal(e.must(200, e.call("GET", "/v1/keys/verify", nil)).body, &k2)
				if !reflect.DeepEqual(k1, k2) {
					t.Fatalf("bundle key %s", b.PublicKey)
				}
			} else if string(b.PublicKey) != "null" {
				t.Fatalf("bundle key %s from a server that does not sign", b.PublicKey)
			}
			evidencetest.Suite(t, bundle, evidence.Check, 150)
		})
	}
}

// checkBundleOffline fetches a VERIFY's evidence bundle and requires the
// offline verifier to accept it.
func checkBundleOffline(t *testing.T, e *testEnv, vid string) {
	t.Helper()
	bundle := e.must(200, e.call("GET", "/v1/verifications/"+vid+"/bundle", nil)).body
	if rep := evidence.Check(bundle, evidence.Options{}); !rep.OK() {
		t.Fatalf("the offline verifier refuses the bundle of %s: %+v", vid, rep.Findings)
	}
}
