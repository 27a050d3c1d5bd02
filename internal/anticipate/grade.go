package anticipate

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
)

// Status is a criterion's status in a VERIFY.
type Status string

// Criterion statuses.
const (
	StatusPass    Status = "PASS"
	StatusFail    Status = "FAIL"
	StatusPending Status = "PENDING"
	StatusErrored Status = "ERROR"
)

// Verdict is a VERIFY's overall verdict. PASS and FAIL are final.
type Verdict string

// Verdicts.
const (
	VerdictPass    Verdict = "PASS"
	VerdictFail    Verdict = "FAIL"
	VerdictPending Verdict = "PENDING"
)

// Final reports whether the verdict can no longer change.
func (v Verdict) Final() bool { return v == VerdictPass || v == VerdictFail }

// GradedByCode is the graded_by of DETERMINISTIC criteria.
const GradedByCode = "code"

// Limits on a grade.
const (
	MaxRationaleLen = 8192 // bytes
	MaxGradedByLen  = 256  // bytes
	MaxEvidenceLen  = 2048 // bytes of a result's evidence
)

// ScoreDecimals is the number of decimal places scores are rounded to
// before they are reported and compared with passing_threshold, so that
// binary floating-point noise (0.7000000000000001) never decides a verdict.
const ScoreDecimals = 6

// Result is the grading of one criterion in a VERIFY.
type Result struct {
	CriterionID string      `json:"criterion_id"` // the criterion graded
	Category    Category    `json:"category"`     // outcome, trajectory or anti
	Measurement Measurement `json:"measurement"`  // as declared
	Weight      float64     `json:"weight"`       // as declared
	Status      Status      `json:"status"`       // PASS, FAIL, PENDING or ERROR
	// Score is in [0, 1]; null while PENDING.
	Score *float64 `json:"score"`
	// Evidence says what the grade rests on: the assertion's result and the
	// values it read, the evaluation error, or who is awaited.
	Evidence string `json:"evidence"`
	// GradedBy is "code" for DETERMINISTIC criteria, the grader for others,
	// "" while PENDING.
	GradedBy string `json:"graded_by"`
	// Rationale is the model judge's or reviewer's explanation of a grade.
	Rationale string `json:"rationale,omitempty"`
	// PromptDigest, on a model's grade, is "sha256:" and the hex SHA-256 of
	// the RFC 8785 form of the request body that got the grade (the judge
	// request, or the model API's request with its model), so the grade can
	// be reproduced by sending it again.
	PromptDigest string `json:"prompt_digest,omitempty"`
}

// Verification is a VERIFY message (design.md section 4) plus the optional
// server_signature.
type Verification struct {
	ProtocolVersion    string   `json:"protocol_version"`     // the anticipation's
	MessageType        string   `json:"message_type"`         // always "VERIFY"
	VerificationID     string   `json:"verification_id"`      // see VerificationIDFor
	AnticipationID     string   `json:"anticipation_id"`      // the sealed ANTICIPATE graded against
	PlanID             string   `json:"plan_id"`              // the executed plan
	SessionID          string   `json:"session_id"`           // the anticipation's
	AgentID            string   `json:"agent_id"`             // the anticipation's
	AppID              string   `json:"app_id"`               // the anticipation's
	Timestamp          string   `json:"timestamp"`            // RFC 3339 time of the latest change
	Results            []Result `json:"results"`              // one per criterion, in declaration order
	Score              float64  `json:"score"`                // see the package documentation
	PassingThreshold   float64  `json:"passing_threshold"`    // the policy's
	AntiCriteriaFailed []string `json:"anti_criteria_failed"` // graded anti criteria scored below 1
	Verdict            Verdict  `json:"verdict"`              // PASS, FAIL or PENDING
	AnticipationDigest string   `json:"anticipation_digest"`  // the ANTICIPATE's d_dna_signature ("" when Sampled)
	ExecutionDigest    string   `json:"execution_digest"`     // head of the plan's event chain
	DDNASignature      string   `json:"d_dna_signature"`      // see Seal
	// Sampled (an extension member) marks a VERIFY of a plan that declared
	// no ANTICIPATE, graded by the sampled evaluator Evaluator with
	// criteria configured on the server: nothing was declared before the
	// run, so it has no anticipation_digest.
	Sampled   bool   `json:"sampled,omitempty"`
	Evaluator string `json:"evaluator,omitempty"`
	// CriteriaDigest (with Sampled) is the d_dna_signature of the
	// stand-in ANTICIPATE the evaluator's criteria made, which the VERIFY
	// was graded against: it ties them to the signed VERIFY without
	// presenting them as declared.
	CriteriaDigest string `json:"criteria_digest,omitempty"`
	// ServerSignature is "ed25519:" and the unpadded base64url Ed25519
	// signature of the same canonical bytes d_dna_signature hashes; see
	// SignEd25519.
	ServerSignature string `json:"server_signature,omitempty"`
}

// CriterionGrade is a grade already given to a HEURISTIC or HUMAN
// criterion.
type CriterionGrade struct {
	Score     float64 `json:"score"`               // in [0, 1]
	Rationale string  `json:"rationale,omitempty"` // the grader's explanation
	GradedBy  string  `json:"graded_by"`           // who graded, e.g. "human:bob" or "model:judge"
	// PromptDigest is a model grade's Result.PromptDigest.
	PromptDigest string `json:"prompt_digest,omitempty"`
}

// Execution identifies the execution a VERIFY grades.
type Execution struct {
	// VerificationID is the VERIFY's id; when empty, VerificationIDFor of
	// the anticipation's digest and PlanID is used.
	VerificationID string
	// PlanID is the executed plan; when empty, the anticipation's plan_id.
	PlanID string
	// ExecutionDigest is the head of the plan's event chain (ChainDigest of
	// its last event).
	ExecutionDigest string
}

// VerificationIDFor returns the deterministic id of the VERIFY of an
// anticipation (by its digest) for a plan: "vrf-" and 32 hex digits of
// SHA-256 over the digest, a zero byte and the plan id. Running VERIFY
// again for the same pair yields the same id, which makes the change-feed
// processor idempotent.
func VerificationIDFor(anticipationDigest, planID string) string {
	sum := sha256.Sum256([]byte(anticipationDigest + "\x00" + planID))
	return "vrf-" + hex.EncodeToString(sum[:16])
}

// SampledVerificationIDFor returns the deterministic id of the VERIFY an
// online evaluator makes of a plan that declared no ANTICIPATE: "vrs-"
// and 32 hex digits of SHA-256 over the agent, the evaluator and the plan,
// zero-separated.
func SampledVerificationIDFor(agentID, evaluator, planID string) string {
	sum := sha256.Sum256([]byte(agentID + "\x00" + evaluator + "\x00" + planID))
	return "vrs-" + hex.EncodeToString(sum[:16])
}

// Grade grades an execution against a sealed anticipation (design.md
// section 4) and returns the sealed VERIFY (see Seal).
//
// DETERMINISTIC criteria evaluate their program from programs (compiled
// on demand when absent) against env: true scores 1 (PASS), false 0
// (FAIL), an evaluation or compile error 0 (ERROR, with the reason as
// evidence). HEURISTIC and HUMAN criteria take their grade from grades, by
// criterion id, and are PENDING without one; a grade whose score is not a
// finite number in [0, 1] makes the criterion ERROR. A graded criterion's
// status is PASS when its score reaches passing_threshold (anti criteria:
// when it is 1), else FAIL. Score, anti_criteria_failed and verdict follow
// the rules in the package documentation (Scoring and verdicts). Grade
// never fails and never panics; a nil a yields a FAIL verdict with no
// results.
func Grade(a *Anticipation, programs Programs, env *assertion.Env, grades map[string]CriterionGrade, exec Execution, now time.Time) Verification {
	if a == nil {
		v := Verification{MessageType: MessageTypeVerify, Verdict: VerdictFail, Results: []Result{},
			AntiCriteriaFailed: []string{}, Timestamp: now.UTC().Format(time.RFC3339Nano)}
		_ = Seal(&v)
		return v
	}
	// Validate guarantees d_dna_signature == Digest(Raw); recompute only
	// for an anticipation built without it.
	digest := a.DDNASignature
	if digest == "" {
		digest, _ = Digest(a.Raw)
	}
	planID := exec.PlanID
	if planID == "" {
		planID = a.PlanID
	}
	id := exec.VerificationID
	if id == "" {
		id = VerificationIDFor(digest, planID)
	}
	v := Verification{
		ProtocolVersion:    a.ProtocolVersion,
		MessageType:        MessageTypeVerify,
		VerificationID:     id,
		AnticipationID:     a.AnticipationID,
		PlanID:             planID,
		SessionID:          a.SessionID,
		AgentID:            a.AgentID,
		AppID:              a.AppID,
		Timestamp:          now.UTC().Format(time.RFC3339Nano),
		PassingThreshold:   a.GradingPolicy.PassingThreshold,
		AnticipationDigest: digest,
		ExecutionDigest:    exec.ExecutionDigest,
	}
	for _, c := range a.Criteria() {
		r := Result{CriterionID: c.CriterionID, Category: c.Category, Measurement: c.Measurement, Weight: c.Weight}
		switch c.Measurement {
		case Deterministic:
			gradeDeterministic(&r, c.Criterion, programs, env)
		default:
			if g, ok := grades[c.CriterionID]; ok {
				if err := checkScore(g.Score); err != "" {
					r.Status, r.Score = StatusErrored, ptr(0)
					r.Evidence = "the stored grade is invalid: score " + err
					r.GradedBy = g.GradedBy
				} else {
					setGrade(&r, a.GradingPolicy, g)
				}
			} else {
				r.Status = StatusPending
				r.Evidence = awaiting(c.Measurement)
			}
		}
		v.Results = append(v.Results, r)
	}
	if v.Results == nil {
		v.Results = []Result{}
	}
	v.Score, v.Verdict, v.AntiCriteriaFailed = tally(v.Results, a.GradingPolicy)
	_ = Seal(&v) // cannot fail: every number in v is finite
	return v
}

func ptr(f float64) *float64 { return &f }

func awaiting(m Measurement) string {
	if m == Human {
		return "awaiting a grade from a human reviewer"
	}
	return "awaiting a grade from the model judge"
}

func gradeDeterministic(r *Result, c Criterion, programs Programs, env *assertion.Env) {
	r.GradedBy = GradedByCode
	p := programs[c.CriterionID]
	if p == nil || p.Source() != c.Assertion {
		var err error
		p, err = assertion.Compile(c.Assertion)
		if err != nil {
			r.Status, r.Score = StatusErrored, ptr(0)
			r.Evidence = "assertion does not compile: " + err.Error()
			return
		}
	}
	ok, trace, err := p.EvalTrace(env)
	if err != nil {
		r.Status, r.Score = StatusErrored, ptr(0)
		r.Evidence = truncate(err.Error(), MaxEvidenceLen)
		return
	}
	r.Evidence = fmt.Sprintf("assertion evaluated to %v", ok)
	if len(trace) > 0 {
		r.Evidence += " with " + strings.Join(trace, ", ")
	}
	r.Evidence = truncate(r.Evidence, MaxEvidenceLen)
	if ok {
		r.Status, r.Score = StatusPass, ptr(1)
	} else {
		r.Status, r.Score = StatusFail, ptr(0)
	}
}

// setGrade records a valid grade on a HEURISTIC or HUMAN result.
func setGrade(r *Result, p GradingPolicy, g CriterionGrade) {
	r.Score = ptr(g.Score)
	r.GradedBy = g.GradedBy
	r.Rationale = g.Rationale
	r.PromptDigest = g.PromptDigest
	r.Evidence = "graded by " + g.GradedBy
	if g.GradedBy == "" {
		r.Evidence = "graded"
	}
	bar := p.PassingThreshold
	if r.Category == CategoryAnti {
		bar = 1
	}
	if round(g.Score) >= bar {
		r.Status = StatusPass
	} else {
		r.Status = StatusFail
	}
}

// checkScore returns "" for a finite score in [0, 1], else the reason.
func checkScore(s float64) string {
	switch {
	case math.IsNaN(s) || math.IsInf(s, 0):
		return "must be a finite number"
	case s < 0 || s > 1:
		return fmt.Sprintf("must be between 0 and 1 inclusive, got %v", s)
	}
	return ""
}

// round rounds to ScoreDecimals decimal places.
func round(x float64) float64 {
	const scale = 1e6
	return math.Round(x*scale) / scale
}

// tally computes a VERIFY's score, verdict and failed anti criteria from
// its results:
//
//   - Each result weighs its weight with weighted_scoring, else 1. ERROR
//     results count as graded with score 0.
//   - score = sum(w*s)/sum(w) over graded (non-PENDING) results; 0 when
//     none is graded. Once nothing is PENDING this is the score over every
//     criterion of the three categories.
//   - anti_criteria_failed lists graded anti criteria with a score below 1.
//   - Verdict: FAIL when fail_on_any_anti_criteria and anti_criteria_failed
//     is not empty; otherwise, while any result is PENDING, FAIL when even
//     full marks on every PENDING result could not reach passing_threshold,
//     else PENDING; otherwise PASS when score >= passing_threshold, else
//     FAIL. Scores are rounded to ScoreDecimals places before comparing.
func tally(results []Result, p GradingPolicy) (float64, Verdict, []string) {
	var gradedW, gradedWS, pendingW float64
	pending := false
	failed := []string{}
	for _, r := range results {
		w := 1.0
		if p.WeightedScoring {
			w = r.Weight
		}
		if r.Status == StatusPending || r.Score == nil {
			pending = true
			pendingW += w
			continue
		}
		s := *r.Score
		gradedW += w
		gradedWS += w * s
		if r.Category == CategoryAnti && s < 1 {
			failed = append(failed, r.CriterionID)
		}
	}
	sc := 0.0
	if gradedW > 0 {
		sc = round(gradedWS / gradedW)
	}
	switch {
	case p.FailOnAnyAntiCriteria && len(failed) > 0:
		return sc, VerdictFail, failed
	case pending:
		best := 1.0
		if total := gradedW + pendingW; total > 0 {
			best = round((gradedWS + pendingW) / total)
		}
		if best < p.PassingThreshold {
			return sc, VerdictFail, failed
		}
		return sc, VerdictPending, failed
	case sc >= p.PassingThreshold:
		return sc, VerdictPass, failed
	default:
		return sc, VerdictFail, failed
	}
}

// ApplyGrade records a grade for a PENDING HEURISTIC or HUMAN criterion of
// v, recomputes score and verdict under policy (the sealed anticipation's
// grading_policy), sets the timestamp to now and re-seals. v is not
// modified; the updated copy is returned.
//
// Errors: errs.Invalid naming criterion_id when the criterion is empty or
// not in v; errs.Invalid naming score when it is not a finite number in
// [0, 1]; errs.Invalid naming rationale or graded_by when too long;
// errs.Conflict when v's verdict is already final (PASS or FAIL) or the
// criterion already has a grade (a DETERMINISTIC criterion always has one).
func ApplyGrade(v Verification, policy GradingPolicy, criterionID string, score float64, rationale, gradedBy string, now time.Time) (Verification, error) {
	return ApplyCriterionGrade(v, policy, criterionID, CriterionGrade{Score: score, Rationale: rationale, GradedBy: gradedBy}, now)
}

// ApplyCriterionGrade is ApplyGrade with the grade as a CriterionGrade,
// which also carries a model grade's prompt digest. Its errors are
// ApplyGrade's.
func ApplyCriterionGrade(v Verification, policy GradingPolicy, criterionID string, g CriterionGrade, now time.Time) (Verification, error) {
	score, rationale, gradedBy := g.Score, g.Rationale, g.GradedBy
	var c errs.Collector
	idx := -1
	for i := range v.Results {
		if v.Results[i].CriterionID == criterionID {
			idx = i
			break
		}
	}
	switch {
	case criterionID == "":
		c.Add("criterion_id", "is required")
	case idx < 0:
		c.Add("criterion_id", "%q is not a criterion of verification %s", truncate(criterionID, MaxIDLen), v.VerificationID)
	}
	if msg := checkScore(score); msg != "" {
		c.Add("score", "%s", msg)
	}
	if len(rationale) > MaxRationaleLen {
		c.Add("rationale", "is longer than %d bytes", MaxRationaleLen)
	}
	if len(gradedBy) > MaxGradedByLen {
		c.Add("graded_by", "is longer than %d bytes", MaxGradedByLen)
	}
	if err := c.Err("invalid grade"); err != nil {
		return v, err
	}
	if v.Verdict.Final() {
		return v, errs.E(errs.Conflict, "verification %s already has the final verdict %s; grades can no longer change it", v.VerificationID, v.Verdict)
	}
	if r := v.Results[idx]; r.Status != StatusPending {
		return v, errs.E(errs.Conflict, "criterion %s of verification %s is already graded (%s by %s)", criterionID, v.VerificationID, r.Status, r.GradedBy)
	}
	out := v
	out.Results = append([]Result(nil), v.Results...)
	out.AntiCriteriaFailed = append([]string(nil), v.AntiCriteriaFailed...)
	setGrade(&out.Results[idx], policy, g)
	out.PassingThreshold = policy.PassingThreshold
	out.Score, out.Verdict, out.AntiCriteriaFailed = tally(out.Results, policy)
	out.Timestamp = now.UTC().Format(time.RFC3339Nano)
	if err := Seal(&out); err != nil {
		return v, err
	}
	return out, nil
}

// verifyCanonical returns v in JSON, RFC 8785 canonical form, without the
// named top-level fields.
func verifyCanonical(v *Verification, without ...string) ([]byte, error) {
	// Written in the members' canonical order and without HTML escaping,
	// the JSON is usually canonical already, and Canonical only checks it.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(canonicalOrder(v)); err != nil {
		return nil, errs.E(errs.Invalid, "verification cannot be encoded: %s", err.Error())
	}
	return canonicalWithout(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), without...)
}

// VerifySignedBytes returns the bytes a VERIFY's server_signature signs: the
// RFC 8785 canonical form of the VERIFY (the JSON object raw) without
// d_dna_signature and server_signature. It returns an errs.Invalid error
// when raw is not a canonicalizable JSON object.
func VerifySignedBytes(raw []byte) ([]byte, error) {
	return canonicalWithout(raw, SignatureField, ServerSignatureField)
}

// Seal sets v.DDNASignature to the seed's d_dna_signature of v's JSON (see
// Digest: everything but d_dna_signature is covered) after clearing a
// server_signature made over earlier content. It returns an errs.Invalid
// error when v cannot be encoded (a score that is NaN).
func Seal(v *Verification) error {
	if v == nil {
		return errs.E(errs.Invalid, "no verification")
	}
	v.ServerSignature = ""
	return seal(v)
}

// seal sets v.DDNASignature over everything else v holds, server_signature
// included.
func seal(v *Verification) error {
	canon, err := verifyCanonical(v, SignatureField)
	if err != nil {
		return err
	}
	v.DDNASignature = digestBytes(canon)
	return nil
}

// CheckSeal returns nil when v.DDNASignature matches v's content (every
// field but d_dna_signature, server_signature included), else an
// errs.Invalid error naming d_dna_signature.
func CheckSeal(v *Verification) error {
	if v == nil {
		return errs.E(errs.Invalid, "no verification")
	}
	canon, err := verifyCanonical(v, SignatureField)
	if err != nil {
		return err
	}
	if digestBytes(canon) != v.DDNASignature {
		return &errs.Error{Code: errs.Invalid, Message: "verification does not match its seal",
			Fields: []errs.FieldError{{Path: SignatureField, Message: signatureHelp}}}
	}
	return nil
}

// serverSigPrefix starts a server_signature.
const serverSigPrefix = "ed25519:"

// SignEd25519 signs and seals v, in this order: server_signature is set to
// "ed25519:" and the unpadded base64url Ed25519 signature, by key, of the
// canonical VERIFY without d_dna_signature and server_signature
// (VerifySignedBytes); then d_dna_signature is computed over everything
// else, the signature included (Seal's rule). It returns an errs.Invalid
// error when key is not an Ed25519 private key of the right length or v
// cannot be encoded.
func SignEd25519(v *Verification, key ed25519.PrivateKey) error {
	if len(key) != ed25519.PrivateKeySize {
		return errs.E(errs.Invalid, "server signing key must be a %d-byte Ed25519 private key", ed25519.PrivateKeySize)
	}
	if v == nil {
		return errs.E(errs.Invalid, "no verification")
	}
	canon, err := verifyCanonical(v, SignatureField, ServerSignatureField)
	if err != nil {
		return err
	}
	v.ServerSignature = serverSigPrefix + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key, canon))
	return seal(v)
}

// ParseServerSignature decodes a server_signature ("ed25519:" and an
// unpadded base64url Ed25519 signature). It returns an errs.Invalid error
// naming server_signature when sig is not of that form.
func ParseServerSignature(sig string) ([]byte, error) {
	bad := func(msg string) error {
		return &errs.Error{Code: errs.Invalid, Message: "verification signature is invalid",
			Fields: []errs.FieldError{{Path: ServerSignatureField, Message: msg}}}
	}
	enc, ok := strings.CutPrefix(sig, serverSigPrefix)
	if !ok {
		return nil, bad(`must start with "ed25519:"`)
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) != ed25519.SignatureSize {
		return nil, bad("is not an unpadded base64url Ed25519 signature")
	}
	return b, nil
}

// VerifyEd25519 checks v's seal and its server_signature against pub. It
// returns nil when both hold, else an errs.Invalid error naming the field
// that does not.
func VerifyEd25519(v *Verification, pub ed25519.PublicKey) error {
	if err := CheckSeal(v); err != nil {
		return err
	}
	bad := func(msg string) error {
		return &errs.Error{Code: errs.Invalid, Message: "verification signature is invalid",
			Fields: []errs.FieldError{{Path: ServerSignatureField, Message: msg}}}
	}
	if len(pub) != ed25519.PublicKeySize {
		return bad("cannot be checked: the public key is not an Ed25519 key")
	}
	sig, err := ParseServerSignature(v.ServerSignature)
	if err != nil {
		return err
	}
	canon, err := verifyCanonical(v, SignatureField, ServerSignatureField)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, canon, sig) {
		return bad("does not verify with the server's public key")
	}
	return nil
}

// Tally returns the score, verdict and failed anti criteria of results
// under policy p, by the rules Grade and ApplyGrade apply (see tally). An
// offline verifier uses it to tally a VERIFY's results again.
func Tally(results []Result, p GradingPolicy) (float64, Verdict, []string) {
	return tally(results, p)
}
