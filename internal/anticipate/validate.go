package anticipate

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
)

// topLevelFields are the fields of an ANTICIPATE: the seed's plus emitter.
var topLevelFields = []string{
	"protocol_version", "message_type", "emitter", "app_id", "agent_id", "anticipation_id",
	"plan_id", "scope_envelope_id", "session_id", "timestamp", "expectations",
	"grading_policy", SignatureField,
}

// refusedInside says why an unknown field inside expectations or
// grading_policy is refused while one at the top level is kept.
const refusedInside = "unknown fields inside expectations and grading_policy are refused, " +
	"since a grader that understood one could change what success means " +
	"(unknown fields are kept only at the top level of the message)"

var categoryKeys = []struct {
	key      string
	category Category
}{
	{"outcome_criteria", CategoryOutcome},
	{"trajectory_criteria", CategoryTrajectory},
	{"anti_criteria", CategoryAnti},
}

// Validate decodes and validates an ANTICIPATE message (design.md section
// 4) and compiles its DETERMINISTIC assertions (see Programs).
//
// It returns an *errs.Error with Code errs.Invalid, listing every failing
// field by JSON path (for example
// "expectations.trajectory_criteria[0].assertion"), when: raw is empty, not
// a JSON object, not canonicalizable under RFC 8785 (duplicate keys,
// invalid UTF-8, out-of-range numbers); a field inside expectations or
// grading_policy (criteria included) is unknown (names match exactly, case
// included); a top-level field the server does not interpret (kept in Raw,
// named in Extra, covered by d_dna_signature) has a name that is not a
// valid identifier or equals a known one but for letter case, or there are
// more than MaxExtraFields of them; a required field (protocol_version,
// message_type, app_id, agent_id, anticipation_id, scope_envelope_id,
// session_id, timestamp, expectations, grading_policy, d_dna_signature and
// every field of a criterion and of the policy) is absent, null or empty;
// message_type is not "ANTICIPATE"; emitter, measurement or grader_type is
// not one of its values; an id is longer than 128 bytes or has control
// characters; a description or assertion is longer than 4096 bytes; a
// weight or passing_threshold is not a finite number in [0, 1]; timestamp
// is not RFC 3339; a criterion id repeats (across categories); there are
// more than 200 criteria; a measurement is not allowed by grader_type; a
// DETERMINISTIC assertion does not compile; the policy can never fail (no
// criteria; weighted_scoring with every weight 0; passing_threshold 0
// unless fail_on_any_anti_criteria is true and there is an anti criterion);
// or d_dna_signature is not Digest(raw).
func Validate(raw []byte) (*Anticipation, error) {
	canon, err := Canonical(raw)
	if err != nil {
		return nil, err
	}
	var c errs.Collector
	top, ok := decodeObject(&c, "", raw, true)
	if !ok {
		return nil, errs.E(errs.Invalid, "an ANTICIPATE message must be a JSON object")
	}
	a := &Anticipation{Raw: append(json.RawMessage(nil), raw...)}
	a.Extra = top.extras(topLevelFields)
	a.ProtocolVersion = top.str("protocol_version", true, MaxVersionLen)
	a.MessageType = top.str("message_type", true, 64)
	if a.MessageType != "" && a.MessageType != MessageTypeAnticipate {
		c.Add("message_type", "must be %q, got %q", MessageTypeAnticipate, a.MessageType)
	}
	if top.get("emitter") != nil {
		a.Emitter = Emitter(top.enum("emitter", string(EmitterApplication),
			string(EmitterGovernanceAuthority), string(EmitterExternalEvaluator)))
	}
	a.AppID = top.id("app_id", true)
	a.AgentID = top.id("agent_id", true)
	a.AnticipationID = top.id("anticipation_id", true)
	a.PlanID = top.id("plan_id", false)
	a.ScopeEnvelopeID = top.id("scope_envelope_id", true)
	a.SessionID = top.id("session_id", true)
	a.Timestamp = top.str("timestamp", true, 64)
	if a.Timestamp != "" {
		t, err := parseTime(a.Timestamp)
		if err != nil {
			c.Add("timestamp", "must be an RFC 3339 date-time such as 2026-06-24T10:00:00Z")
		} else {
			a.DeclaredAt = t
		}
	}
	if sig := top.get(SignatureField); sig != nil {
		if err := json.Unmarshal(sig, &a.DDNASignature); err != nil {
			c.Add(SignatureField, "must be a string that %s", signatureHelp)
		} else if msg := checkSignature(canon, a.DDNASignature); msg != "" {
			c.Add(SignatureField, "%s", msg)
		}
	} else {
		c.Add(SignatureField, "is required and %s", signatureHelp)
	}

	policyOK := decodePolicy(&c, top, &a.GradingPolicy)
	decodeExpectations(&c, top, a, policyOK)

	if err := c.Err("invalid ANTICIPATE message"); err != nil {
		return nil, err
	}
	return a, nil
}

// parseTime parses an RFC 3339 date-time and returns it in UTC.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	// time.Parse accepts a few forms RFC 3339 does not (a lower-case t or
	// z, hours beyond 23 in the offset); insist on the upper-case forms.
	if strings.ContainsAny(s, "tz") {
		return time.Time{}, fmt.Errorf("not RFC 3339")
	}
	return t.UTC(), nil
}

// decodePolicy decodes grading_policy; it reports whether the policy is
// complete and valid, so that the checks that depend on it can run.
func decodePolicy(c *errs.Collector, top *object, p *GradingPolicy) bool {
	o, ok := decodeObject(c, "grading_policy", top.get("grading_policy"), true)
	if !ok {
		return false
	}
	before := len(c.List)
	o.onlyBecause(refusedInside, "grader_type", "passing_threshold", "weighted_scoring", "fail_on_any_anti_criteria")
	p.GraderType = GraderType(o.enum("grader_type", string(GraderCode), string(GraderModel),
		string(GraderHuman), string(GraderComposite)))
	p.PassingThreshold, _ = o.unit("passing_threshold")
	p.WeightedScoring, _ = o.boolean("weighted_scoring")
	p.FailOnAnyAntiCriteria, _ = o.boolean("fail_on_any_anti_criteria")
	return len(c.List) == before
}

// decodeExpectations decodes the three categories, checks every criterion,
// compiles the DETERMINISTIC assertions and, when the policy is valid,
// checks grader/measurement consistency and that the policy can fail.
func decodeExpectations(c *errs.Collector, top *object, a *Anticipation, policyOK bool) {
	o, ok := decodeObject(c, "expectations", top.get("expectations"), true)
	if !ok {
		return
	}
	before := len(c.List)
	o.onlyBecause(refusedInside, "outcome_criteria", "trajectory_criteria", "anti_criteria")
	seen := map[string]string{} // criterion id -> path of its first use
	a.programs = Programs{}
	total := 0
	cats := []*[]Criterion{&a.Expectations.OutcomeCriteria, &a.Expectations.TrajectoryCriteria, &a.Expectations.AntiCriteria}
	for ci, ck := range categoryKeys {
		elems, ok := o.array(ck.key)
		if !ok {
			continue
		}
		total += len(elems)
		if total > MaxCriteria {
			c.Add(o.at(ck.key), "there are more than %d criteria in total", MaxCriteria)
			return
		}
		list := make([]Criterion, 0, len(elems))
		for i, raw := range elems {
			path := fmt.Sprintf("%s[%d]", o.at(ck.key), i)
			cr, ok := decodeCriterion(c, path, raw)
			if !ok {
				continue
			}
			if cr.CriterionID != "" {
				if first, dup := seen[cr.CriterionID]; dup {
					c.Add(path+".criterion_id", "%q is already used by %s; criterion ids must be unique across all categories", cr.CriterionID, first)
				} else {
					seen[cr.CriterionID] = path
				}
			}
			if policyOK && cr.Measurement != "" && !a.GradingPolicy.GraderType.Allows(cr.Measurement) {
				c.Add(path+".measurement", "%s is not allowed with grader_type %s (%s)", cr.Measurement,
					a.GradingPolicy.GraderType, allowedText(a.GradingPolicy.GraderType))
			}
			if cr.Measurement == Deterministic && cr.Assertion != "" {
				p, err := assertion.Compile(cr.Assertion)
				if err != nil {
					c.Add(path+".assertion", "does not compile: %s", err.Error())
				} else if cr.CriterionID != "" {
					a.programs[cr.CriterionID] = p
				}
			}
			list = append(list, cr)
		}
		*cats[ci] = list
	}
	if total == 0 {
		c.Add("expectations", "has no criteria; at least one criterion is required, or the policy could never fail")
		return
	}
	queued := 0
	for _, cr := range a.Criteria() {
		if cr.Queue != "" {
			queued++
		}
	}
	if queued > MaxQueued {
		c.Add("expectations", "has %d criteria that name a review queue; at most %d", queued, MaxQueued)
	}
	if !policyOK || len(c.List) > before {
		// The never-fail checks only make sense on complete criteria.
		return
	}
	p := a.GradingPolicy
	if p.WeightedScoring {
		allZero := true
		for _, cr := range a.Criteria() {
			if cr.Weight != 0 {
				allZero = false
				break
			}
		}
		if allZero {
			c.Add("expectations", "every criterion weight is 0 while grading_policy.weighted_scoring is true; "+
				"the score would be undefined and the policy could never fail")
		}
	}
	if p.PassingThreshold == 0 && !(p.FailOnAnyAntiCriteria && len(a.Expectations.AntiCriteria) > 0) {
		c.Add("grading_policy.passing_threshold", "is 0, so every score passes; with no anti criterion "+
			"enforced by fail_on_any_anti_criteria the policy could never fail")
	}
}

func allowedText(g GraderType) string {
	switch g {
	case GraderCode:
		return "CODE allows only DETERMINISTIC"
	case GraderModel:
		return "MODEL allows DETERMINISTIC and HEURISTIC"
	case GraderHuman:
		return "HUMAN allows only HUMAN"
	}
	return "COMPOSITE allows any"
}

// decodeCriterion decodes one criterion; ok is false when it is not an
// object at all.
func decodeCriterion(c *errs.Collector, path string, raw json.RawMessage) (Criterion, bool) {
	var cr Criterion
	o, ok := decodeObject(c, path, raw, true)
	if !ok {
		return cr, false
	}
	o.onlyBecause(refusedInside, "criterion_id", "description", "measurement", "assertion", "weight", "queue", "calibrate")
	cr.CriterionID = o.id("criterion_id", true)
	cr.Description = o.str("description", true, MaxDescriptionLen)
	cr.Measurement = Measurement(o.enum("measurement", string(Deterministic), string(Heuristic), string(Human)))
	cr.Assertion = o.str("assertion", true, MaxAssertionLen)
	cr.Weight, _ = o.unit("weight")
	cr.Queue = o.id("queue", false)
	if cal, ok := decodeObject(c, o.at("calibrate"), o.get("calibrate"), false); ok {
		cal.onlyBecause(refusedInside, "sample")
		if f, ok := cal.unit("sample"); ok {
			if f == 0 {
				c.Add(cal.at("sample"), "must be more than 0 (leave calibrate out to review none)")
			}
			cr.Calibrate = &Calibrate{Sample: f}
		}
	}
	switch {
	case cr.Queue != "" && cr.Measurement == Deterministic:
		c.Add(o.at("queue"), "is for HUMAN criteria (reviewed in the queue) and HEURISTIC ones with calibrate; a DETERMINISTIC criterion is graded by its assertion")
	case cr.Queue != "" && cr.Measurement == Heuristic && cr.Calibrate == nil:
		c.Add(o.at("queue"), "on a HEURISTIC criterion needs calibrate (the share of the model's grades people review); a HEURISTIC criterion's grade is the judge's")
	case cr.Calibrate != nil && cr.Measurement != Heuristic && cr.Measurement != "":
		c.Add(o.at("calibrate"), "is for HEURISTIC criteria, which a model judge grades; a %s criterion is not graded by the judge", cr.Measurement)
	case cr.Calibrate != nil && cr.Queue == "":
		c.Add(o.at("calibrate"), "needs queue: the review queue its sample is sent to")
	}
	return cr, true
}
