package anticipate

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

func gradeSeed(t *testing.T, a *Anticipation, events [][]byte, grades map[string]CriterionGrade) Verification {
	t.Helper()
	v := Grade(a, a.Programs(), envOf(t, events, nil), grades,
		Execution{PlanID: "plan-abc123", ExecutionDigest: chainHead(events)}, t0.Add(time.Hour))
	if err := CheckSeal(&v); err != nil {
		t.Fatalf("verification not sealed: %v", err)
	}
	return v
}

func TestGradeSeed(t *testing.T) {
	a := mustValidate(t, seedRaw(t))
	tests := []struct {
		name     string
		steps    int
		removed  bool
		obs      []map[string]any
		score    float64
		verdict  Verdict
		statuses map[string]Status
		anti     []string
	}{
		{"all criteria met", 3, false, nil, 1.0, VerdictPass,
			map[string]Status{"oc-001": StatusPass, "oc-002": StatusPass, "tc-001": StatusPass, "tc-002": StatusPass, "ac-001": StatusPass}, nil},
		{"four steps", 4, false, nil, 0.861111, VerdictPass,
			map[string]Status{"tc-001": StatusFail, "oc-001": StatusPass, "ac-001": StatusPass}, nil},
		{"iam_remove_user invoked", 3, true, nil, 0.722222, VerdictFail,
			map[string]Status{"ac-001": StatusFail, "tc-001": StatusPass}, []string{"ac-001"}},
		{"missing observation", 3, false, []map[string]any{
			{"call": "user_exists", "args": []any{"alice"}, "value": true},
			{"call": "policy_count", "args": []any{"alice"}, "value": 2},
			{"call": "group_policy_count", "args": []any{"engineering"}, "value": 3},
		}, 0.722222, VerdictPass, map[string]Status{"oc-001": StatusErrored, "oc-002": StatusPass}, nil},
		{"observation false", 3, false, []map[string]any{
			{"call": "user_exists", "args": []any{"alice"}, "value": false},
			{"call": "group_member", "args": []any{"alice", "engineering"}, "value": true},
			{"call": "policy_count", "args": []any{"alice"}, "value": 4},
			{"call": "group_policy_count", "args": []any{"engineering"}, "value": 3},
		}, 0.5, VerdictFail, map[string]Status{"oc-001": StatusFail, "oc-002": StatusFail}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := seedEvents(t, tt.steps, tt.removed, tt.obs)
			v := gradeSeed(t, a, events, nil)
			if math.Abs(v.Score-tt.score) > 1e-9 || v.Verdict != tt.verdict {
				t.Fatalf("score %v verdict %s; want %v %s\n%s", v.Score, v.Verdict, tt.score, tt.verdict, dump(v))
			}
			for id, st := range tt.statuses {
				if r := resultOf(v, id); r.Status != st {
					t.Errorf("%s status %s, want %s (%s)", id, r.Status, st, r.Evidence)
				}
			}
			if strings.Join(v.AntiCriteriaFailed, ",") != strings.Join(tt.anti, ",") || v.AntiCriteriaFailed == nil {
				t.Errorf("anti_criteria_failed = %#v", v.AntiCriteriaFailed)
			}
			if v.ExecutionDigest != chainHead(events) || v.AnticipationDigest != a.DDNASignature {
				t.Errorf("digests %s %s", v.ExecutionDigest, v.AnticipationDigest)
			}
		})
	}
}

func TestGradeSeedDetails(t *testing.T) {
	a := mustValidate(t, seedRaw(t))
	v := gradeSeed(t, a, seedEvents(t, 4, false, nil), nil)
	if got := math.Round(v.Score*1000) / 1000; got != 0.861 {
		t.Errorf("score rounds to %v, want 0.861", got)
	}
	if math.Abs(v.Score-3.1/3.6) > 1e-6 {
		t.Errorf("score %v, want 3.1/3.6", v.Score)
	}
	tc := resultOf(v, "tc-001")
	if *tc.Score != 0 || tc.GradedBy != GradedByCode || !strings.Contains(tc.Evidence, "false") || !strings.Contains(tc.Evidence, "step_count=4") {
		t.Errorf("tc-001 = %+v", tc)
	}
	if tc.Category != CategoryTrajectory || tc.Measurement != Deterministic || tc.Weight != 0.5 {
		t.Errorf("tc-001 = %+v", tc)
	}
	if v.MessageType != "VERIFY" || v.ProtocolVersion != "4.1" || v.AnticipationID != a.AnticipationID ||
		v.PlanID != "plan-abc123" || v.SessionID != "ses-xyz789" || v.AgentID != a.AgentID || v.AppID != "APP_PRJ" ||
		v.PassingThreshold != 0.7 || v.VerificationID != VerificationIDFor(a.DDNASignature, "plan-abc123") {
		t.Errorf("header = %s", dump(v))
	}
	// The JSON shape: every field of design.md section 4.
	var m map[string]any
	raw, _ := json.Marshal(v)
	_ = json.Unmarshal(raw, &m)
	for _, k := range []string{"protocol_version", "message_type", "verification_id", "anticipation_id", "plan_id",
		"session_id", "agent_id", "app_id", "timestamp", "results", "score", "passing_threshold",
		"anti_criteria_failed", "verdict", "anticipation_digest", "execution_digest", "d_dna_signature"} {
		if _, ok := m[k]; !ok {
			t.Errorf("VERIFY lacks %s", k)
		}
	}
	r0 := m["results"].([]any)[0].(map[string]any)
	for _, k := range []string{"criterion_id", "category", "measurement", "weight", "status", "score", "evidence", "graded_by"} {
		if _, ok := r0[k]; !ok {
			t.Errorf("result lacks %s", k)
		}
	}
	// Missing observation: ERROR scores 0 with the reason as evidence.
	v = gradeSeed(t, a, seedEvents(t, 3, false, []map[string]any{
		{"call": "user_exists", "args": []any{"alice"}, "value": true},
	}), nil)
	oc := resultOf(v, "oc-001")
	if oc.Status != StatusErrored || *oc.Score != 0 || !strings.Contains(oc.Evidence, `group_member("alice", "engineering")`) {
		t.Errorf("oc-001 = %+v", oc)
	}
}

func TestGradeWithoutVariables(t *testing.T) {
	a := mustValidate(t, seedRaw(t))
	v := Grade(a, nil, nil, nil, Execution{}, t0) // no events at all, programs compiled on demand
	if v.Verdict != VerdictFail || resultOf(v, "oc-001").Status != StatusErrored ||
		!strings.Contains(resultOf(v, "oc-001").Evidence, "target_username") {
		t.Errorf("%s", dump(v))
	}
	if v.PlanID != "plan-abc123" {
		t.Errorf("plan id %q", v.PlanID)
	}
	if nv := Grade(nil, nil, nil, nil, Execution{}, t0); nv.Verdict != VerdictFail {
		t.Errorf("nil anticipation verdict %s", nv.Verdict)
	}
}

// compositeSeed is the seed with a HUMAN outcome criterion hc-001 (weight
// 0.4) under a COMPOSITE policy.
func compositeSeed(t *testing.T, threshold float64, extra ...map[string]any) *Anticipation {
	m := seedMap(t)
	policy(m)["grader_type"] = "COMPOSITE"
	policy(m)["passing_threshold"] = threshold
	e := m["expectations"].(map[string]any)
	e["outcome_criteria"] = append(e["outcome_criteria"].([]any), map[string]any{
		"criterion_id": "hc-001", "description": "Ticket notes are clear", "measurement": "HUMAN",
		"assertion": "A reviewer finds the onboarding notes clear", "weight": 0.4,
	})
	for _, x := range extra {
		e["anti_criteria"] = append(e["anti_criteria"].([]any), x)
	}
	return mustValidate(t, signed(t, m))
}

func TestHumanGradeLifecycle(t *testing.T) {
	a := compositeSeed(t, 0.7)
	v := gradeSeed(t, a, seedEvents(t, 4, false, nil), nil)
	hc := resultOf(v, "hc-001")
	if v.Verdict != VerdictPending || hc.Status != StatusPending || hc.Score != nil || !strings.Contains(hc.Evidence, "human") {
		t.Fatalf("pending: %s", dump(v))
	}
	// While pending, the score is over graded criteria: 3.1/3.6.
	if math.Abs(v.Score-0.861111) > 1e-9 {
		t.Errorf("pending score %v", v.Score)
	}
	raw, _ := json.Marshal(hc)
	if !strings.Contains(string(raw), `"score":null`) {
		t.Errorf("pending score not null: %s", raw)
	}

	// Invalid grades.
	for _, tt := range []struct {
		id    string
		score float64
		path  string
	}{
		{"nope", 1, "criterion_id"},
		{"", 1, "criterion_id"},
		{"hc-001", 1.5, "score"},
		{"hc-001", -0.1, "score"},
		{"hc-001", math.NaN(), "score"},
		{"hc-001", math.Inf(1), "score"},
	} {
		_, err := ApplyGrade(v, a.GradingPolicy, tt.id, tt.score, "", "human:bob", t0)
		if !errs.Is(err, errs.Invalid) || fieldMessage(err, tt.path) == "" {
			t.Errorf("ApplyGrade(%q, %v) = %v; want Invalid naming %s", tt.id, tt.score, err, tt.path)
		}
	}
	// A DETERMINISTIC criterion is already graded.
	if _, err := ApplyGrade(v, a.GradingPolicy, "tc-001", 1, "", "human:bob", t0); !errs.Is(err, errs.Conflict) {
		t.Errorf("grading tc-001: %v", err)
	}

	later := t0.Add(2 * time.Hour)
	g, err := ApplyGrade(v, a.GradingPolicy, "hc-001", 1, "Notes are complete", "human:bob", later)
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != VerdictPending || resultOf(v, "hc-001").Status != StatusPending {
		t.Errorf("ApplyGrade modified its input")
	}
	hc = resultOf(g, "hc-001")
	// (3.1 + 0.4) / 4.0 = 0.875.
	if g.Verdict != VerdictPass || math.Abs(g.Score-0.875) > 1e-9 || hc.Status != StatusPass || *hc.Score != 1 ||
		hc.GradedBy != "human:bob" || hc.Rationale != "Notes are complete" {
		t.Fatalf("graded: %s", dump(g))
	}
	if g.Timestamp != later.Format(time.RFC3339Nano) || g.DDNASignature == v.DDNASignature {
		t.Errorf("timestamp %s signature unchanged %v", g.Timestamp, g.DDNASignature == v.DDNASignature)
	}
	if err := CheckSeal(&g); err != nil {
		t.Errorf("re-seal: %v", err)
	}
	// A second grade is a conflict.
	if _, err := ApplyGrade(g, a.GradingPolicy, "hc-001", 0, "", "human:eve", later); !errs.Is(err, errs.Conflict) {
		t.Errorf("second grade: %v", err)
	}
	// A stored grade reproduces the same verdict on re-grading.
	g2 := gradeSeed(t, a, seedEvents(t, 4, false, nil), map[string]CriterionGrade{"hc-001": {Score: 1, Rationale: "Notes are complete", GradedBy: "human:bob"}})
	if g2.Verdict != VerdictPass || g2.Score != g.Score {
		t.Errorf("regrade: %s", dump(g2))
	}
	// A corrupt stored grade makes the criterion ERROR.
	g3 := gradeSeed(t, a, seedEvents(t, 3, false, nil), map[string]CriterionGrade{"hc-001": {Score: 7}})
	if r := resultOf(g3, "hc-001"); r.Status != StatusErrored || *r.Score != 0 {
		t.Errorf("corrupt grade: %+v", r)
	}
}

func TestGradeEarlyFail(t *testing.T) {
	// Threshold 0.95: with tc-001 failed (weight 0.5 of 4.0), even full
	// marks on hc-001 give 3.5/4.0 = 0.875 < 0.95, so FAIL at once.
	a := compositeSeed(t, 0.95)
	v := gradeSeed(t, a, seedEvents(t, 4, false, nil), nil)
	if v.Verdict != VerdictFail || resultOf(v, "hc-001").Status != StatusPending {
		t.Fatalf("early fail: %s", dump(v))
	}
	if _, err := ApplyGrade(v, a.GradingPolicy, "hc-001", 1, "", "human:bob", t0); !errs.Is(err, errs.Conflict) {
		t.Errorf("grade after final verdict: %v", err)
	}
	// With all deterministic criteria met, full marks could reach it: PENDING.
	v = gradeSeed(t, a, seedEvents(t, 3, false, nil), nil)
	if v.Verdict != VerdictPending {
		t.Errorf("verdict %s", v.Verdict)
	}
	// A low human grade then fails it: 3.6/4.0 = 0.9 < 0.95.
	g, err := ApplyGrade(v, a.GradingPolicy, "hc-001", 0, "unclear", "human:bob", t0)
	if err != nil || g.Verdict != VerdictFail || math.Abs(g.Score-0.9) > 1e-9 || resultOf(g, "hc-001").Status != StatusFail {
		t.Errorf("low grade: %v %s", err, dump(g))
	}
}

func TestHeuristicAntiCriterion(t *testing.T) {
	a := compositeSeed(t, 0.7, map[string]any{
		"criterion_id": "ac-002", "description": "No hostile tone", "measurement": "HEURISTIC",
		"assertion": "The agent's messages are never hostile", "weight": 0.5,
	})
	env := envOf(t, seedEvents(t, 3, false, nil), nil)
	v := Grade(a, a.Programs(), env, nil, Execution{PlanID: "plan-abc123"}, t0)
	reqs := JudgeRequests(v, a, env)
	if len(reqs) != 1 || reqs[0].CriterionID != "ac-002" || reqs[0].Evidence.Trajectory.StepCount != 3 ||
		reqs[0].Evidence.OutcomeVariables["target_username"] != "alice" || reqs[0].VerificationID != v.VerificationID {
		t.Fatalf("judge requests %+v", reqs)
	}
	if reqs[0].Evidence.Trajectory.ToolsInvoked["iam_create_user"] != 1 || reqs[0].Evidence.Trajectory.DurationSeconds != 10 {
		t.Errorf("trajectory %+v", reqs[0].Evidence.Trajectory)
	}
	// A judge score below 1 on an anti criterion fails the verdict.
	g, err := ApplyGrade(v, a.GradingPolicy, "ac-002", 0.9, "one curt reply", "model:judge", t0)
	if err != nil || g.Verdict != VerdictFail || strings.Join(g.AntiCriteriaFailed, ",") != "ac-002" || resultOf(g, "ac-002").Status != StatusFail {
		t.Errorf("anti graded: %v %s", err, dump(g))
	}
	if JudgeRequests(g, a, env) != nil {
		t.Errorf("requests after final verdict")
	}
}

func TestScoringRules(t *testing.T) {
	r := func(id string, cat Category, w float64, st Status, s float64) Result {
		res := Result{CriterionID: id, Category: cat, Weight: w, Status: st}
		if st != StatusPending {
			res.Score = ptr(s)
		}
		return res
	}
	tests := []struct {
		name    string
		results []Result
		p       GradingPolicy
		score   float64
		verdict Verdict
		anti    string
	}{
		{"plain mean", []Result{r("a", CategoryOutcome, 1, StatusPass, 1), r("b", CategoryOutcome, 0.1, StatusFail, 0), r("c", CategoryOutcome, 0.1, StatusPass, 1)},
			GradingPolicy{PassingThreshold: 0.6}, 0.666667, VerdictPass, ""},
		{"weighted", []Result{r("a", CategoryOutcome, 1, StatusPass, 1), r("b", CategoryOutcome, 0.1, StatusFail, 0), r("c", CategoryOutcome, 0.1, StatusPass, 1)},
			GradingPolicy{PassingThreshold: 0.95, WeightedScoring: true}, 0.916667, VerdictFail, ""},
		{"exact threshold despite float noise", []Result{r("a", CategoryOutcome, 0.1, StatusPass, 1), r("b", CategoryOutcome, 0.2, StatusPass, 1), r("c", CategoryOutcome, 0.7, StatusFail, 0.3)},
			GradingPolicy{PassingThreshold: 0.51, WeightedScoring: true}, 0.51, VerdictPass, ""},
		{"anti failure without fail_on_any is listed but scored", []Result{r("a", CategoryOutcome, 1, StatusPass, 1), r("x", CategoryAnti, 0.2, StatusFail, 0)},
			GradingPolicy{PassingThreshold: 0.8, WeightedScoring: true}, 0.833333, VerdictPass, "x"},
		{"anti failure with fail_on_any", []Result{r("a", CategoryOutcome, 1, StatusPass, 1), r("x", CategoryAnti, 0.2, StatusFail, 0)},
			GradingPolicy{PassingThreshold: 0.8, WeightedScoring: true, FailOnAnyAntiCriteria: true}, 0.833333, VerdictFail, "x"},
		{"anti ERROR fails", []Result{r("a", CategoryOutcome, 1, StatusPass, 1), r("x", CategoryAnti, 1, StatusErrored, 0)},
			GradingPolicy{PassingThreshold: 0.1, FailOnAnyAntiCriteria: true}, 0.5, VerdictFail, "x"},
		{"anti failure decides while others pending", []Result{r("h", CategoryOutcome, 1, StatusPending, 0), r("x", CategoryAnti, 1, StatusFail, 0)},
			GradingPolicy{PassingThreshold: 0.1, FailOnAnyAntiCriteria: true}, 0, VerdictFail, "x"},
		{"pending anti does not fail", []Result{r("a", CategoryOutcome, 1, StatusPass, 1), r("x", CategoryAnti, 1, StatusPending, 0)},
			GradingPolicy{PassingThreshold: 0.9, FailOnAnyAntiCriteria: true}, 1, VerdictPending, ""},
		{"all pending", []Result{r("h", CategoryOutcome, 1, StatusPending, 0)},
			GradingPolicy{PassingThreshold: 0.9}, 0, VerdictPending, ""},
		{"pending but unreachable", []Result{r("a", CategoryOutcome, 1, StatusFail, 0), r("h", CategoryOutcome, 1, StatusPending, 0)},
			GradingPolicy{PassingThreshold: 0.6}, 0, VerdictFail, ""},
		{"pending and exactly reachable", []Result{r("a", CategoryOutcome, 1, StatusFail, 0), r("h", CategoryOutcome, 1, StatusPending, 0)},
			GradingPolicy{PassingThreshold: 0.5}, 0, VerdictPending, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, v, anti := tally(tt.results, tt.p)
			if math.Abs(s-tt.score) > 1e-9 || v != tt.verdict || strings.Join(anti, ",") != tt.anti {
				t.Fatalf("tally = %v %s %v; want %v %s %s", s, v, anti, tt.score, tt.verdict, tt.anti)
			}
		})
	}
}

func TestSealAndServerSignature(t *testing.T) {
	a := mustValidate(t, seedRaw(t))
	v := gradeSeed(t, a, seedEvents(t, 3, false, nil), nil)
	// The seal is the same Digest as ANTICIPATE's, over the JSON form.
	raw, _ := json.Marshal(v)
	if d, err := Digest(raw); err != nil || d != v.DDNASignature {
		t.Fatalf("Digest(VERIFY) = %s, %v; seal %s", d, err, v.DDNASignature)
	}
	// JSON round trip keeps the seal valid.
	var back Verification
	if err := json.Unmarshal(raw, &back); err != nil || CheckSeal(&back) != nil {
		t.Fatalf("round trip: %v %v", err, CheckSeal(&back))
	}
	// Tampering breaks it.
	back.Verdict = VerdictFail
	if err := CheckSeal(&back); !errs.Is(err, errs.Invalid) {
		t.Errorf("tampered seal accepted")
	}

	pub, priv, _ := ed25519.GenerateKey(nil)
	if err := SignEd25519(&v, priv); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(v.ServerSignature, "ed25519:") || VerifyEd25519(&v, pub) != nil {
		t.Fatalf("server signature %q: %v", v.ServerSignature, VerifyEd25519(&v, pub))
	}
	// The seal covers the server signature (the seed's rule on the VERIFY
	// as returned), and the signature covers everything but both fields.
	if err := CheckSeal(&v); err != nil {
		t.Errorf("seal with server signature: %v", err)
	}
	signedRaw, _ := json.Marshal(v)
	if d, err := Digest(signedRaw); err != nil || d != v.DDNASignature {
		t.Errorf("Digest(signed VERIFY) = %s, %v; d_dna_signature %s", d, err, v.DDNASignature)
	}
	if msg, _ := VerifySignedBytes(signedRaw); !ed25519.Verify(pub, msg, mustSig(t, v.ServerSignature)) {
		t.Errorf("server_signature does not sign the VERIFY without both fields")
	}
	swapped := v
	swapped.ServerSignature = "ed25519:" + base64.RawURLEncoding.EncodeToString(make([]byte, ed25519.SignatureSize))
	if err := CheckSeal(&swapped); fieldMessage(err, SignatureField) == "" {
		t.Errorf("a replaced server_signature passes the seal: %v", err)
	}
	// Signing again (after a grade) replaces the signature and the seal.
	again := v
	again.Score = 0.25
	if err := SignEd25519(&again, priv); err != nil || VerifyEd25519(&again, pub) != nil || again.ServerSignature == v.ServerSignature {
		t.Errorf("re-signing: %v %v", err, VerifyEd25519(&again, pub))
	}
	other, _, _ := ed25519.GenerateKey(nil)
	if err := VerifyEd25519(&v, other); fieldMessage(err, ServerSignatureField) == "" {
		t.Errorf("wrong key accepted: %v", err)
	}
	w := v
	w.Score = 0.5
	_ = Seal(&w)
	w.ServerSignature = v.ServerSignature
	_ = seal(&w) // a seal over the old signature: only the signature is wrong
	if err := VerifyEd25519(&w, pub); fieldMessage(err, ServerSignatureField) == "" {
		t.Errorf("re-sealed content accepted with old signature: %v", err)
	}
	for _, sig := range []string{"", "ed25519:", "ed25519:!!", "rsa:abc"} {
		w := v
		w.ServerSignature = sig
		_ = seal(&w)
		if err := VerifyEd25519(&w, pub); !errs.Is(err, errs.Invalid) {
			t.Errorf("signature %q accepted", sig)
		}
	}
	if err := SignEd25519(&v, priv[:10]); !errs.Is(err, errs.Invalid) {
		t.Errorf("short key: %v", err)
	}
	if err := VerifyEd25519(&v, pub[:3]); !errs.Is(err, errs.Invalid) {
		t.Errorf("short public key: %v", err)
	}
	if err := Seal(nil); !errs.Is(err, errs.Invalid) {
		t.Errorf("Seal(nil): %v", err)
	}
	bad := v
	bad.Score = math.NaN()
	if err := Seal(&bad); !errs.Is(err, errs.Invalid) {
		t.Errorf("Seal(NaN): %v", err)
	}
}

func TestJudgeResponse(t *testing.T) {
	ok := map[string]float64{
		`{"score": 0.8, "rationale": "mostly"}`:       0.8,
		`{"score": 1}`:                                1,
		`{"score": 0, "rationale": "", "model": "x"}`: 0,
	}
	for raw, want := range ok {
		r, err := ValidateJudgeResponse([]byte(raw))
		if err != nil || r.Score != want {
			t.Errorf("%s: %v %v", raw, r, err)
		}
	}
	bad := map[string]string{
		`{"rationale": "no score"}`:      "score",
		`{"score": null}`:                "score",
		`{"score": "NaN"}`:               "score",
		`{"score": "0.5"}`:               "score",
		`{"score": 1.2}`:                 "score",
		`{"score": -0.5}`:                "score",
		`{"score": 0.5, "rationale": 3}`: "rationale",
		`[0.5]`:                          "",
		`0.5`:                            "",
		`{"score": 0.5`:                  "",
		`{"score": 1e999}`:               "",
		``:                               "",
	}
	for raw, path := range bad {
		r, err := ValidateJudgeResponse([]byte(raw))
		if !errs.Is(err, errs.Invalid) || r != nil {
			t.Errorf("%s accepted: %v", raw, r)
			continue
		}
		if path != "" && fieldMessage(err, path) == "" {
			t.Errorf("%s: err %v does not name %s", raw, err, path)
		}
	}
	long := `{"score": 0.5, "rationale": "` + strings.Repeat("r", MaxRationaleLen+1) + `"}`
	if _, err := ValidateJudgeResponse([]byte(long)); fieldMessage(err, "rationale") == "" {
		t.Errorf("long rationale accepted")
	}
}

func FuzzJudgeResponse(f *testing.F) {
	f.Add([]byte(`{"score": 0.5, "rationale": "x"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := ValidateJudgeResponse(raw)
		if err == nil && (r == nil || r.Score < 0 || r.Score > 1 || math.IsNaN(r.Score)) {
			t.Fatalf("accepted %v", r)
		}
	})
}

func dump(v Verification) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

func mustSig(t *testing.T, s string) []byte {
	t.Helper()
	b, err := ParseServerSignature(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
