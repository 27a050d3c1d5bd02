package anticipate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/errs"
)

func TestValidateSeed(t *testing.T) {
	raw := seedRaw(t)
	a := mustValidate(t, raw)
	if a.AnticipationID != "ant-20260624-001" || a.PlanID != "plan-abc123" || a.ProtocolVersion != "4.1" {
		t.Errorf("decoded %+v", a)
	}
	if a.EffectiveEmitter() != EmitterApplication || a.Emitter != "" {
		t.Errorf("emitter = %q / %q", a.Emitter, a.EffectiveEmitter())
	}
	if got := len(a.Criteria()); got != 5 {
		t.Errorf("criteria = %d", got)
	}
	if got := len(a.Programs()); got != 5 {
		t.Errorf("programs = %d", got)
	}
	if a.GradingPolicy != (GradingPolicy{GraderCode, 0.7, true, true}) {
		t.Errorf("policy = %+v", a.GradingPolicy)
	}
	if !a.DeclaredAt.Equal(t0) {
		t.Errorf("DeclaredAt = %v", a.DeclaredAt)
	}
	if !bytes.Equal(a.Raw, raw) {
		t.Errorf("Raw not kept")
	}
	d, _ := Digest(raw)
	if a.DDNASignature != d || !validDigestForm(d) {
		t.Errorf("signature %q digest %q", a.DDNASignature, d)
	}
}

func TestSeedPlaceholderSignature(t *testing.T) {
	raw, _ := readSeedAsIs()
	_, err := Validate(raw)
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("err = %v", err)
	}
	msg := fieldMessage(err, "d_dna_signature")
	for _, want := range []string{`"sha256:"`, "RFC 8785", "JCS", "d_dna_signature field removed", "lowercase hex"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if len(fieldPaths(err)) != 1 {
		t.Errorf("paths = %v", fieldPaths(err))
	}
}

func readSeedAsIs() ([]byte, error) {
	var b bytes.Buffer
	raw, err := readFile("testdata/seed_anticipate.json")
	b.Write(raw)
	return b.Bytes(), err
}

func TestDigestDefinition(t *testing.T) {
	// The digest is SHA-256 over the JCS form without d_dna_signature:
	// sorted keys, no white space, ECMAScript numbers, minimal escapes.
	raw := []byte(`{ "b": 1.50, "a": "x\u0041", "d_dna_signature": "whatever", "c": [1e2, true, null] }`)
	sum := sha256.Sum256([]byte(`{"a":"xA","b":1.5,"c":[100,true,null]}`))
	want := "sha256:" + hex.EncodeToString(sum[:])
	got, err := Digest(raw)
	if err != nil || got != want {
		t.Fatalf("Digest = %q, %v; want %q", got, err, want)
	}
	// Formatting does not matter.
	got2, _ := Digest([]byte(`{"c":[100,true,null],"a":"xA","b":1.5}`))
	if got2 != want {
		t.Errorf("reformatted digest differs")
	}
	// DigestOf of a Go value.
	got3, err := DigestOf(map[string]any{"a": "xA", "b": 1.5, "c": []any{100, true, nil}})
	if err != nil || got3 != want {
		t.Errorf("DigestOf = %q, %v", got3, err)
	}
	for _, bad := range []string{``, `[1]`, `"x"`, `{"a":1,"a":2}`, `{"a":1} x`, "{\"a\":\"\xff\"}", `{"a":1e999}`} {
		if _, err := Digest([]byte(bad)); !errs.Is(err, errs.Invalid) {
			t.Errorf("Digest(%q) err = %v", bad, err)
		}
	}
	if _, err := DigestOf(make(chan int)); !errs.Is(err, errs.Invalid) {
		t.Errorf("DigestOf(chan) err = %v", err)
	}
}

func TestSignRoundTrip(t *testing.T) {
	m := seedMap(t)
	m[SignatureField] = "sha256:0000"
	raw := signed(t, m)
	a := mustValidate(t, raw)
	// Re-indenting and reordering keys keeps the signature valid.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, raw, "", "    "); err != nil {
		t.Fatal(err)
	}
	b := mustValidate(t, pretty.Bytes())
	if a.DDNASignature != b.DDNASignature || !Identical(a, b) {
		t.Errorf("re-indented message differs")
	}
}

func TestValidateValidVariants(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m map[string]any)
	}{
		{"no plan_id", func(m map[string]any) { delete(m, "plan_id") }},
		{"emitter governance_authority", func(m map[string]any) { m["emitter"] = "governance_authority" }},
		{"emitter external_evaluator", func(m map[string]any) { m["emitter"] = "external_evaluator" }},
		{"threshold 0 with enforced anti criterion", func(m map[string]any) { policy(m)["passing_threshold"] = 0 }},
		{"threshold 1", func(m map[string]any) { policy(m)["passing_threshold"] = 1 }},
		{"unweighted with zero weights", func(m map[string]any) {
			policy(m)["weighted_scoring"] = false
			for _, cat := range []string{"outcome_criteria", "trajectory_criteria", "anti_criteria"} {
				for _, c := range criteria(m, cat) {
					c.(map[string]any)["weight"] = 0
				}
			}
		}},
		{"MODEL with HEURISTIC", func(m map[string]any) {
			policy(m)["grader_type"] = "MODEL"
			crit(m, "outcome_criteria", 1)["measurement"] = "HEURISTIC"
			crit(m, "outcome_criteria", 1)["assertion"] = "Permissions look like an engineer's, nothing more"
		}},
		{"HUMAN with HUMAN only", func(m map[string]any) {
			policy(m)["grader_type"] = "HUMAN"
			for _, cat := range []string{"outcome_criteria", "trajectory_criteria", "anti_criteria"} {
				for _, c := range criteria(m, cat) {
					c.(map[string]any)["measurement"] = "HUMAN"
				}
			}
		}},
		{"COMPOSITE mix", func(m map[string]any) {
			policy(m)["grader_type"] = "COMPOSITE"
			crit(m, "outcome_criteria", 1)["measurement"] = "HUMAN"
			crit(m, "trajectory_criteria", 1)["measurement"] = "HEURISTIC"
		}},
		{"only anti criteria", func(m map[string]any) {
			e := m["expectations"].(map[string]any)
			delete(e, "outcome_criteria")
			e["trajectory_criteria"] = nil
		}},
		{"timestamp with offset", func(m map[string]any) { m["timestamp"] = "2026-06-24T12:00:00.5+02:00" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := seedMap(t)
			tt.mutate(m)
			mustValidate(t, signed(t, m))
		})
	}
}

// firstOutcome is the seed's first outcome criterion.
func firstOutcome(m map[string]any) map[string]any {
	return m["expectations"].(map[string]any)["outcome_criteria"].([]any)[0].(map[string]any)
}

func TestValidateInvalid(t *testing.T) {
	long := strings.Repeat("x", MaxIDLen+1)
	tests := []struct {
		name   string
		mutate func(m map[string]any)
		path   string
		substr string
	}{
		{"missing protocol_version", func(m map[string]any) { delete(m, "protocol_version") }, "protocol_version", "required"},
		{"missing message_type", func(m map[string]any) { delete(m, "message_type") }, "message_type", "required"},
		{"wrong message_type", func(m map[string]any) { m["message_type"] = "VERIFY" }, "message_type", `"ANTICIPATE"`},
		{"missing app_id", func(m map[string]any) { delete(m, "app_id") }, "app_id", "required"},
		{"missing agent_id", func(m map[string]any) { delete(m, "agent_id") }, "agent_id", "required"},
		{"missing anticipation_id", func(m map[string]any) { delete(m, "anticipation_id") }, "anticipation_id", "required"},
		{"empty anticipation_id", func(m map[string]any) { m["anticipation_id"] = " " }, "anticipation_id", "required"},
		{"missing scope_envelope_id", func(m map[string]any) { delete(m, "scope_envelope_id") }, "scope_envelope_id", "required"},
		{"missing session_id", func(m map[string]any) { delete(m, "session_id") }, "session_id", "required"},
		{"missing timestamp", func(m map[string]any) { delete(m, "timestamp") }, "timestamp", "required"},
		{"bad timestamp", func(m map[string]any) { m["timestamp"] = "24/06/2026" }, "timestamp", "RFC 3339"},
		{"timestamp without zone", func(m map[string]any) { m["timestamp"] = "2026-06-24T10:00:00" }, "timestamp", "RFC 3339"},
		{"missing expectations", func(m map[string]any) { delete(m, "expectations") }, "expectations", "required"},
		{"missing grading_policy", func(m map[string]any) { delete(m, "grading_policy") }, "grading_policy", "required"},
		{"empty plan_id", func(m map[string]any) { m["plan_id"] = "" }, "plan_id", "empty"},
		{"id too long", func(m map[string]any) { m["anticipation_id"] = long }, "anticipation_id", "128 bytes"},
		{"id with control char", func(m map[string]any) { m["agent_id"] = "a\tb" }, "agent_id", "control"},
		{"id not a string", func(m map[string]any) { m["app_id"] = 7 }, "app_id", "string"},
		{"field in other case", func(m map[string]any) { m["App_ID"] = m["app_id"]; delete(m, "app_id") }, "App_ID", "not a known field"},
		{"extra field in another case of a known one", func(m map[string]any) { m["D_DNA_Signature"] = "x" }, "D_DNA_Signature", "differs from d_dna_signature only in letter case"},
		{"extra field name with a control character", func(m map[string]any) { m["trace\u0001id"] = "x" }, "trace\u0001id", "control character"},
		{"extra field name too long", func(m map[string]any) { m[long] = "x" }, long[:64] + "...", "longer than 128 bytes"},
		{"too many extra fields", func(m map[string]any) {
			for i := 0; i <= MaxExtraFields; i++ {
				m[fmt.Sprintf("x_%03d", i)] = i
			}
		}, "", "at most 64 are kept"},
		{"bad emitter", func(m map[string]any) { m["emitter"] = "developer" }, "emitter", "application"},
		{"expectations not an object", func(m map[string]any) { m["expectations"] = []any{} }, "expectations", "object"},
		{"unknown category", func(m map[string]any) {
			m["expectations"].(map[string]any)["bonus_criteria"] = []any{}
		}, "expectations.bonus_criteria", "not a known field: unknown fields inside expectations and grading_policy are refused, since a grader that understood one could change what success means"},
		{"category not an array", func(m map[string]any) {
			m["expectations"].(map[string]any)["anti_criteria"] = map[string]any{}
		}, "expectations.anti_criteria", "array"},
		{"criterion not an object", func(m map[string]any) {
			m["expectations"].(map[string]any)["anti_criteria"] = []any{"x"}
		}, "expectations.anti_criteria[0]", "object"},
		{"bad measurement", func(m map[string]any) { crit(m, "outcome_criteria", 0)["measurement"] = "FUZZY" },
			"expectations.outcome_criteria[0].measurement", "DETERMINISTIC, HEURISTIC, HUMAN"},
		{"lower-case measurement", func(m map[string]any) { crit(m, "outcome_criteria", 0)["measurement"] = "deterministic" },
			"expectations.outcome_criteria[0].measurement", "one of"},
		{"weight above 1", func(m map[string]any) { crit(m, "outcome_criteria", 0)["weight"] = 1.5 },
			"expectations.outcome_criteria[0].weight", "between 0 and 1"},
		{"negative weight", func(m map[string]any) { crit(m, "trajectory_criteria", 1)["weight"] = -0.1 },
			"expectations.trajectory_criteria[1].weight", "between 0 and 1"},
		{"weight as string", func(m map[string]any) { crit(m, "anti_criteria", 0)["weight"] = "1" },
			"expectations.anti_criteria[0].weight", "number"},
		{"missing weight", func(m map[string]any) { delete(crit(m, "anti_criteria", 0), "weight") },
			"expectations.anti_criteria[0].weight", "required"},
		{"missing criterion_id", func(m map[string]any) { delete(crit(m, "outcome_criteria", 1), "criterion_id") },
			"expectations.outcome_criteria[1].criterion_id", "required"},
		{"missing description", func(m map[string]any) { delete(crit(m, "outcome_criteria", 1), "description") },
			"expectations.outcome_criteria[1].description", "required"},
		{"missing assertion", func(m map[string]any) { delete(crit(m, "trajectory_criteria", 0), "assertion") },
			"expectations.trajectory_criteria[0].assertion", "required"},
		{"unknown criterion field", func(m map[string]any) { crit(m, "outcome_criteria", 0)["severity"] = 1 },
			"expectations.outcome_criteria[0].severity", "could change what success means"},
		{"description too long", func(m map[string]any) {
			crit(m, "outcome_criteria", 0)["description"] = strings.Repeat("d", MaxDescriptionLen+1)
		}, "expectations.outcome_criteria[0].description", "4096 bytes"},
		{"assertion too long", func(m map[string]any) {
			crit(m, "trajectory_criteria", 0)["assertion"] = "step_count <= 3" + strings.Repeat(" ", MaxAssertionLen)
		}, "expectations.trajectory_criteria[0].assertion", "4096 bytes"},
		{"assertion does not parse", func(m map[string]any) { crit(m, "trajectory_criteria", 0)["assertion"] = "step_count <=" },
			"expectations.trajectory_criteria[0].assertion", "does not compile"},
		{"assertion not boolean", func(m map[string]any) { crit(m, "trajectory_criteria", 0)["assertion"] = "step_count" },
			"expectations.trajectory_criteria[0].assertion", "boolean"},
		{"assertion unsupported construct", func(m map[string]any) {
			crit(m, "anti_criteria", 0)["assertion"] = "step_count > 1 ? true : false"
		}, "expectations.anti_criteria[0].assertion", "conditional"},
		{"duplicate criterion id across categories", func(m map[string]any) { crit(m, "anti_criteria", 0)["criterion_id"] = "oc-001" },
			"expectations.anti_criteria[0].criterion_id", "unique"},
		{"duplicate criterion id within category", func(m map[string]any) { crit(m, "outcome_criteria", 1)["criterion_id"] = "oc-001" },
			"expectations.outcome_criteria[1].criterion_id", "expectations.outcome_criteria[0]"},
		{"too many criteria", func(m map[string]any) {
			var list []any
			for i := 0; i <= MaxCriteria; i++ {
				list = append(list, map[string]any{"criterion_id": fmt.Sprintf("x-%d", i), "description": "d",
					"measurement": "DETERMINISTIC", "assertion": "step_count <= 3", "weight": 1})
			}
			m["expectations"].(map[string]any)["outcome_criteria"] = list
		}, "expectations.outcome_criteria", "more than 200"},
		{"bad grader_type", func(m map[string]any) { policy(m)["grader_type"] = "ROBOT" }, "grading_policy.grader_type", "CODE, MODEL, HUMAN, COMPOSITE"},
		{"threshold above 1", func(m map[string]any) { policy(m)["passing_threshold"] = 1.01 }, "grading_policy.passing_threshold", "between 0 and 1"},
		{"threshold negative", func(m map[string]any) { policy(m)["passing_threshold"] = -1 }, "grading_policy.passing_threshold", "between 0 and 1"},
		{"threshold missing", func(m map[string]any) { delete(policy(m), "passing_threshold") }, "grading_policy.passing_threshold", "required"},
		{"weighted_scoring missing", func(m map[string]any) { delete(policy(m), "weighted_scoring") }, "grading_policy.weighted_scoring", "required"},
		{"weighted_scoring not bool", func(m map[string]any) { policy(m)["weighted_scoring"] = "yes" }, "grading_policy.weighted_scoring", "true or false"},
		{"fail_on_any missing", func(m map[string]any) { delete(policy(m), "fail_on_any_anti_criteria") }, "grading_policy.fail_on_any_anti_criteria", "required"},
		{"unknown policy field", func(m map[string]any) { policy(m)["curve"] = true }, "grading_policy.curve", "not a known field: unknown fields inside expectations and grading_policy are refused"},
		{"CODE with HEURISTIC", func(m map[string]any) { crit(m, "outcome_criteria", 1)["measurement"] = "HEURISTIC" },
			"expectations.outcome_criteria[1].measurement", "CODE allows only DETERMINISTIC"},
		{"CODE with HUMAN", func(m map[string]any) { crit(m, "anti_criteria", 0)["measurement"] = "HUMAN" },
			"expectations.anti_criteria[0].measurement", "grader_type CODE"},
		{"MODEL with HUMAN", func(m map[string]any) {
			policy(m)["grader_type"] = "MODEL"
			crit(m, "trajectory_criteria", 1)["measurement"] = "HUMAN"
		}, "expectations.trajectory_criteria[1].measurement", "MODEL allows DETERMINISTIC and HEURISTIC"},
		{"HUMAN with DETERMINISTIC", func(m map[string]any) { policy(m)["grader_type"] = "HUMAN" },
			"expectations.outcome_criteria[0].measurement", "HUMAN allows only HUMAN"},
		{"no criteria", func(m map[string]any) { m["expectations"] = map[string]any{} }, "expectations", "at least one criterion"},
		{"empty categories", func(m map[string]any) {
			m["expectations"] = map[string]any{"outcome_criteria": []any{}, "trajectory_criteria": []any{}, "anti_criteria": []any{}}
		}, "expectations", "could never fail"},
		{"all weights zero", func(m map[string]any) {
			for _, cat := range []string{"outcome_criteria", "trajectory_criteria", "anti_criteria"} {
				for _, c := range criteria(m, cat) {
					c.(map[string]any)["weight"] = 0
				}
			}
		}, "expectations", "every criterion weight is 0"},
		{"threshold 0 without fail_on_any", func(m map[string]any) {
			policy(m)["passing_threshold"] = 0
			policy(m)["fail_on_any_anti_criteria"] = false
		}, "grading_policy.passing_threshold", "never fail"},
		{"queue on a DETERMINISTIC criterion", func(m map[string]any) { firstOutcome(m)["queue"] = "q1" }, "expectations.outcome_criteria[0].queue", "DETERMINISTIC"},
		{"queue on a HEURISTIC criterion without calibrate", func(m map[string]any) {
			policy(m)["grader_type"] = "COMPOSITE"
			firstOutcome(m)["measurement"], firstOutcome(m)["queue"] = "HEURISTIC", "q1"
		}, "expectations.outcome_criteria[0].queue", "needs calibrate"},
		{"calibrate without queue", func(m map[string]any) {
			policy(m)["grader_type"] = "COMPOSITE"
			firstOutcome(m)["measurement"], firstOutcome(m)["calibrate"] = "HEURISTIC", map[string]any{"sample": 0.1}
		}, "expectations.outcome_criteria[0].calibrate", "needs queue"},
		{"calibrate on a HUMAN criterion", func(m map[string]any) {
			policy(m)["grader_type"] = "COMPOSITE"
			firstOutcome(m)["measurement"], firstOutcome(m)["queue"], firstOutcome(m)["calibrate"] = "HUMAN", "q1", map[string]any{"sample": 0.1}
		}, "expectations.outcome_criteria[0].calibrate", "HEURISTIC"},
		{"calibrate sample 0", func(m map[string]any) {
			policy(m)["grader_type"] = "COMPOSITE"
			firstOutcome(m)["measurement"], firstOutcome(m)["queue"], firstOutcome(m)["calibrate"] = "HEURISTIC", "q1", map[string]any{"sample": 0}
		}, "expectations.outcome_criteria[0].calibrate.sample", "more than 0"},
		{"calibrate unknown field", func(m map[string]any) {
			policy(m)["grader_type"] = "COMPOSITE"
			firstOutcome(m)["measurement"], firstOutcome(m)["queue"], firstOutcome(m)["calibrate"] = "HEURISTIC", "q1", map[string]any{"sample": 0.5, "rate": 1}
		}, "expectations.outcome_criteria[0].calibrate.rate", "unknown"},
		{"too many queued criteria", func(m map[string]any) {
			policy(m)["grader_type"] = "COMPOSITE"
			ex := m["expectations"].(map[string]any)
			for i := 0; i <= MaxQueued; i++ {
				ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{"criterion_id": fmt.Sprintf("hq-%d", i), "description": "d",
					"measurement": "HUMAN", "assertion": "a person says so", "weight": 0.1, "queue": "q1"})
			}
		}, "expectations", "name a review queue"},
		{"threshold 0 without anti criteria", func(m map[string]any) {
			policy(m)["passing_threshold"] = 0
			delete(m["expectations"].(map[string]any), "anti_criteria")
		}, "grading_policy.passing_threshold", "never fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := seedMap(t)
			tt.mutate(m)
			_, err := Validate(signed(t, m))
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("err = %v; want Invalid", err)
			}
			msg := fieldMessage(err, tt.path)
			if msg == "" {
				t.Fatalf("paths = %v; want %s (err %v)", fieldPaths(err), tt.path, err)
			}
			if !strings.Contains(msg, tt.substr) {
				t.Fatalf("%s: message %q lacks %q", tt.path, msg, tt.substr)
			}
		})
	}
}

func TestValidateSignatureErrors(t *testing.T) {
	good := seedRaw(t)
	m := seedMap(t)
	delete(m, SignatureField)
	unsigned, _ := json.Marshal(m)
	if _, err := Validate(unsigned); !strings.Contains(fieldMessage(err, SignatureField), "is required and must be \"sha256:\"") {
		t.Errorf("missing signature: %v", err)
	}
	d, _ := Digest(good)
	tests := []struct {
		name, sig, substr string
	}{
		{"wrong value", "sha256:" + strings.Repeat("0", 64), "does not match"},
		{"upper-case hex", strings.ToUpper(d[:7]) + strings.ToUpper(d[7:]), "not of the form"},
		{"upper-case hex digits", "sha256:" + strings.ToUpper(d[7:]), "not of the form"},
		{"no prefix", d[7:], "not of the form"},
		{"other algorithm", "sha512:" + d[7:], "not of the form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := bytes.Replace(good, []byte(d), []byte(tt.sig), 1)
			_, err := Validate(raw)
			msg := fieldMessage(err, SignatureField)
			if !strings.Contains(msg, tt.substr) || !strings.Contains(msg, `"sha256:"`) {
				t.Fatalf("message %q (err %v)", msg, err)
			}
		})
	}
	// Changing any content invalidates the signature.
	tampered := bytes.Replace(good, []byte(`"passing_threshold": 0.7`), []byte(`"passing_threshold": 0.1`), 1)
	if _, err := Validate(tampered); fieldMessage(err, SignatureField) == "" {
		t.Fatalf("tampered message accepted: %v", err)
	}
}

func TestValidateBody(t *testing.T) {
	dup := bytes.Replace(seedRaw(t), []byte(`"app_id": "APP_PRJ",`), []byte(`"app_id": "APP_PRJ", "app_id": "OTHER",`), 1)
	for name, raw := range map[string][]byte{
		"empty":          nil,
		"spaces":         []byte("  "),
		"not JSON":       []byte("hello"),
		"array":          []byte("[]"),
		"string":         []byte(`"x"`),
		"null":           []byte("null"),
		"trailing data":  append(seedRaw(t), []byte(" {}")...),
		"duplicate keys": dup,
		"invalid UTF-8":  []byte("{\"app_id\":\"\xff\"}"),
		"lone surrogate": []byte(`{"app_id":"\ud800"}`),
	} {
		t.Run(name, func(t *testing.T) {
			a, err := Validate(raw)
			if a != nil || !errs.Is(err, errs.Invalid) {
				t.Fatalf("Validate = %v, %v", a, err)
			}
		})
	}
}

func TestLimitsReportedTogether(t *testing.T) {
	m := seedMap(t)
	delete(m, "app_id")
	policy(m)["grader_type"] = "ROBOT"
	crit(m, "trajectory_criteria", 0)["assertion"] = "step_count <="
	_, err := Validate(signed(t, m))
	got := strings.Join(fieldPaths(err), ",")
	for _, p := range []string{"app_id", "grading_policy.grader_type", "expectations.trajectory_criteria[0].assertion"} {
		if !strings.Contains(got, p) {
			t.Errorf("paths %s lack %s", got, p)
		}
	}
}

func FuzzValidate(f *testing.F) {
	raw, _ := readSeedAsIs()
	f.Add(raw)
	f.Add([]byte(`{"expectations":{"anti_criteria":[{"assertion":"NOT x"}]}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		checkValidate(t, raw)
		// Signed, the input reaches past the signature check.
		if signedRaw, err := Sign(raw); err == nil {
			checkValidate(t, signedRaw)
		}
	})
}

// checkValidate checks Validate's contract on one input: an Invalid error,
// or an anticipation that keeps raw as sent and whose kept extra fields
// are top-level members within bounds.
func checkValidate(t *testing.T, raw []byte) {
	a, err := Validate(raw)
	if err != nil {
		if !errs.Is(err, errs.Invalid) {
			t.Fatalf("error code %s", errs.CodeOf(err))
		}
		return
	}
	if a == nil || !bytes.Equal(a.Raw, raw) {
		t.Fatal("valid anticipation not kept as sent")
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		t.Fatalf("accepted a non-object: %v", err)
	}
	if len(a.Extra) > MaxExtraFields {
		t.Fatalf("%d extra fields", len(a.Extra))
	}
	for _, k := range a.Extra {
		if _, ok := top[k]; !ok {
			t.Fatalf("extra field %q not in the message", k)
		}
		for _, n := range topLevelFields {
			if strings.EqualFold(k, n) {
				t.Fatalf("extra field %q is a case variant of %s", k, n)
			}
		}
	}
	if d, err := Digest(raw); err != nil || d != a.DDNASignature {
		t.Fatalf("accepted with d_dna_signature %s, digest %s (%v)", a.DDNASignature, d, err)
	}
}

// referenceStrip is the obvious implementation of canonicalWithout: decode,
// delete, re-encode, canonicalize again.
func referenceStrip(t testing.TB, raw []byte, fields ...string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		delete(m, f)
	}
	b, _ := json.Marshal(m)
	out, err := Canonical(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestStripTopLevel(t *testing.T) {
	docs := []string{
		`{}`,
		`{"d_dna_signature":"x"}`,
		`{"a":1,"d_dna_signature":"x"}`,
		`{"d_dna_signature":"x","z":[1,{"d_dna_signature":"keep"}]}`,
		`{"a":"}\",{","b":{"c":[{},[]]},"d_dna_signature":{"nested":["]"]},"server_signature":"s","zz":null}`,
		`{"\u0000":"\\","d_dna_signature":"x","€":"ü"}`,
	}
	for _, d := range docs {
		got, err := canonicalWithout([]byte(d), SignatureField, ServerSignatureField)
		want := referenceStrip(t, []byte(d), SignatureField, ServerSignatureField)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: got %s, want %s (%v)", d, got, want, err)
		}
	}
	seed := seedRaw(t)
	got, _ := canonicalWithout(seed, SignatureField)
	if !bytes.Equal(got, referenceStrip(t, seed, SignatureField)) {
		t.Errorf("seed differs")
	}
}

func FuzzStripTopLevel(f *testing.F) {
	f.Add([]byte(`{"a":"}\",{","d_dna_signature":{"x":["]"]},"zz":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := canonicalWithout(raw, SignatureField, ServerSignatureField)
		if err != nil {
			return
		}
		if want := referenceStrip(t, raw, SignatureField, ServerSignatureField); !bytes.Equal(got, want) {
			t.Fatalf("got %s want %s", got, want)
		}
	})
}

func TestAnticipationMarshalJSON(t *testing.T) {
	a := mustValidate(t, seedRaw(t))
	out, err := json.Marshal(map[string]any{"anticipation": a, "sealed": true})
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Anticipation json.RawMessage `json:"anticipation"`
	}
	_ = json.Unmarshal(out, &back)
	b := mustValidate(t, back.Anticipation) // still validly signed
	if !Identical(a, b) {
		t.Errorf("marshalled anticipation differs")
	}
	// Without Raw, the fields are encoded.
	c := *a
	c.Raw = nil
	out, _ = json.Marshal(c)
	if !strings.Contains(string(out), `"anticipation_id":"ant-20260624-001"`) || strings.Contains(string(out), "Raw") {
		t.Errorf("fields encoding: %s", out)
	}
}

// TestValidateKeepsTopLevelExtras: fields the server does not interpret at
// the top level of an ANTICIPATE are accepted, kept byte for byte and
// covered by d_dna_signature; inside expectations and grading_policy they
// are refused (TestValidateInvalid).
func TestValidateKeepsTopLevelExtras(t *testing.T) {
	m := seedMap(t)
	m["trace_id"] = "4bf92f3577b34da6a3ce929d0e0e4736"
	m["x-cost"] = map[string]any{"usd": 0.0042, "tokens": []any{12, 7}}
	m["note"] = nil
	raw := signed(t, m)
	a := mustValidate(t, raw)
	if !bytes.Equal(a.Raw, raw) {
		t.Errorf("raw not kept")
	}
	if want := []string{"note", "trace_id", "x-cost"}; fmt.Sprint(a.Extra) != fmt.Sprint(want) {
		t.Errorf("Extra = %v; want %v", a.Extra, want)
	}
	out, err := json.Marshal(a)
	if err != nil || !bytes.Contains(out, []byte(`"x-cost":{"tokens":[12,7],"usd":0.0042}`)) {
		t.Errorf("marshalled without the extra fields: %s %v", out, err)
	}
	// The signature covers them: changing one without re-signing is refused.
	tampered := bytes.Replace(raw, []byte(`0.0042`), []byte(`0.0043`), 1)
	if _, err := Validate(tampered); fieldMessage(err, SignatureField) == "" {
		t.Errorf("changed extra field kept its signature: %v", err)
	}
	// Exactly MaxExtraFields are accepted.
	m = seedMap(t)
	for i := 0; i < MaxExtraFields; i++ {
		m[fmt.Sprintf("x_%03d", i)] = i
	}
	if a := mustValidate(t, signed(t, m)); len(a.Extra) != MaxExtraFields {
		t.Errorf("%d extra fields", len(a.Extra))
	}
	// The seed itself has none.
	if a := mustValidate(t, seedRaw(t)); a.Extra != nil {
		t.Errorf("seed Extra = %v", a.Extra)
	}
}
