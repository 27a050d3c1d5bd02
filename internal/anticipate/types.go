package anticipate

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/agentclock/clockwork/internal/assertion"
)

// MessageType values.
const (
	MessageTypeAnticipate = "ANTICIPATE"
	MessageTypeVerify     = "VERIFY"
)

// Limits on an ANTICIPATE message.
const (
	MaxCriteria       = 200  // criteria across the three categories
	MaxIDLen          = 128  // bytes, every *_id field
	MaxDescriptionLen = 4096 // bytes
	MaxAssertionLen   = assertion.MaxSourceLen
	MaxVersionLen     = 32 // bytes, protocol_version
	// MaxQueued bounds the criteria that name a review queue: their
	// items are opened in the VERIFY's own commit and hold each
	// criterion's text and every review of it.
	MaxQueued = 10
)

// Emitter says who declared an anticipation (RFC-032 section 3.6). It is
// carried in the optional top-level field "emitter"; absent means
// EmitterApplication.
type Emitter string

// Emitters.
const (
	EmitterApplication         Emitter = "application"
	EmitterGovernanceAuthority Emitter = "governance_authority"
	EmitterExternalEvaluator   Emitter = "external_evaluator"
)

// Valid reports whether e is one of the three emitters.
func (e Emitter) Valid() bool {
	switch e {
	case EmitterApplication, EmitterGovernanceAuthority, EmitterExternalEvaluator:
		return true
	}
	return false
}

// Measurement says how a criterion is graded.
type Measurement string

// Measurements.
const (
	Deterministic Measurement = "DETERMINISTIC" // the assertion, by code
	Heuristic     Measurement = "HEURISTIC"     // a model judge
	Human         Measurement = "HUMAN"         // a human reviewer
)

// GraderType is a grading policy's grader_type.
type GraderType string

// Grader types.
const (
	GraderCode      GraderType = "CODE"
	GraderModel     GraderType = "MODEL"
	GraderHuman     GraderType = "HUMAN"
	GraderComposite GraderType = "COMPOSITE"
)

// Allows reports whether a policy with grader type g may contain a
// criterion measured by m: CODE only DETERMINISTIC, MODEL DETERMINISTIC and
// HEURISTIC, HUMAN only HUMAN, COMPOSITE any. Unknown values allow nothing.
func (g GraderType) Allows(m Measurement) bool {
	switch g {
	case GraderCode:
		return m == Deterministic
	case GraderModel:
		return m == Deterministic || m == Heuristic
	case GraderHuman:
		return m == Human
	case GraderComposite:
		return m == Deterministic || m == Heuristic || m == Human
	}
	return false
}

// Category is the expectations category a criterion belongs to, as it
// appears in a VERIFY result.
type Category string

// Categories, named after their keys in expectations without "_criteria".
const (
	CategoryOutcome    Category = "outcome"
	CategoryTrajectory Category = "trajectory"
	CategoryAnti       Category = "anti"
)

// Criterion is one expectation (RFC-032 section 3.3).
type Criterion struct {
	CriterionID string      `json:"criterion_id"` // unique across the three categories
	Description string      `json:"description"`  // human-readable expectation
	Measurement Measurement `json:"measurement"`  // DETERMINISTIC, HEURISTIC or HUMAN
	Assertion   string      `json:"assertion"`    // an assertion (DETERMINISTIC) or prose for a grader
	Weight      float64     `json:"weight"`       // relative importance in [0, 1]
	// Queue (an extension field) names the review queue whose reviewers
	// grade a HUMAN criterion, or that receives a sample of a HEURISTIC
	// criterion's model grades to calibrate the judge (Calibrate).
	Queue string `json:"queue,omitempty"`
	// Calibrate (an extension field, HEURISTIC with a Queue) sends a share
	// of the model judge's grades of this criterion to human review.
	Calibrate *Calibrate `json:"calibrate,omitempty"`
}

// Calibrate says which share of a HEURISTIC criterion's model grades is
// also reviewed by people, to measure how the judge agrees with them.
type Calibrate struct {
	Sample float64 `json:"sample"` // in (0, 1]
}

// Expectations holds the three categories of criteria (RFC-032 3.3). A
// missing or null category is empty.
type Expectations struct {
	OutcomeCriteria    []Criterion `json:"outcome_criteria"`    // what the final state should be
	TrajectoryCriteria []Criterion `json:"trajectory_criteria"` // how the agent should get there
	AntiCriteria       []Criterion `json:"anti_criteria"`       // what must not happen
}

// GradingPolicy says how the criteria are scored (RFC-032 section 3.4).
type GradingPolicy struct {
	GraderType            GraderType `json:"grader_type"`               // CODE, MODEL, HUMAN or COMPOSITE
	PassingThreshold      float64    `json:"passing_threshold"`         // minimum score for PASS, in [0, 1]
	WeightedScoring       bool       `json:"weighted_scoring"`          // weigh criteria by weight, else plain mean
	FailOnAnyAntiCriteria bool       `json:"fail_on_any_anti_criteria"` // any failed anti criterion fails the verdict
}

// Anticipation is a validated ANTICIPATE message (RFC-032 section 3.1) plus
// the optional "emitter" and any top-level fields the server does not
// interpret (Extra). Raw is the message exactly as received; the
// d_dna_signature and every digest are computed from Raw, never from a
// re-encoding of the struct. Obtain one from Validate.
type Anticipation struct {
	ProtocolVersion string        `json:"protocol_version"`  // AIGP protocol version, e.g. "4.1"
	MessageType     string        `json:"message_type"`      // always "ANTICIPATE"
	Emitter         Emitter       `json:"emitter,omitempty"` // who declared it; "" means application
	AppID           string        `json:"app_id"`            // application that owns the execution
	AgentID         string        `json:"agent_id"`          // agent that will perform the work
	AnticipationID  string        `json:"anticipation_id"`   // unique id of this declaration
	PlanID          string        `json:"plan_id,omitempty"` // plan anticipated; "" binds to the scope envelope
	ScopeEnvelopeID string        `json:"scope_envelope_id"` // active scope envelope
	SessionID       string        `json:"session_id"`        // session of the execution
	Timestamp       string        `json:"timestamp"`         // RFC 3339 declaration time, as sent
	Expectations    Expectations  `json:"expectations"`      // the criteria
	GradingPolicy   GradingPolicy `json:"grading_policy"`    // how they are scored
	DDNASignature   string        `json:"d_dna_signature"`   // Digest of the message

	// Extra names the top-level fields the server does not interpret,
	// sorted; they are kept in Raw and covered by d_dna_signature.
	Extra []string `json:"-"`
	// Raw is the message as received.
	Raw json.RawMessage `json:"-"`
	// DeclaredAt is Timestamp parsed, in UTC.
	DeclaredAt time.Time `json:"-"`

	programs Programs // compiled DETERMINISTIC assertions, by criterion id
}

// EffectiveEmitter returns the emitter, EmitterApplication when the field
// was absent.
func (a *Anticipation) EffectiveEmitter() Emitter {
	if a == nil || a.Emitter == "" {
		return EmitterApplication
	}
	return a.Emitter
}

// MarshalJSON encodes the anticipation as the message it was validated
// from (Raw, compacted), so that the output keeps a valid d_dna_signature
// even though the fields would re-encode differently (1.0 becomes 1). When
// Raw is empty or not valid JSON it encodes the fields. Decode with
// Validate, not json.Unmarshal.
func (a Anticipation) MarshalJSON() ([]byte, error) {
	if len(a.Raw) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, a.Raw); err == nil {
			return b.Bytes(), nil
		}
	}
	type fields Anticipation // without this method
	return json.Marshal(fields(a))
}

// CategorizedCriterion is a criterion with its category and its index in
// that category's array.
type CategorizedCriterion struct {
	Criterion
	Category Category // the category it is declared in
	Index    int      // its index in that category's array
}

// Criteria returns every criterion in declaration order: outcome, then
// trajectory, then anti criteria.
func (a *Anticipation) Criteria() []CategorizedCriterion {
	if a == nil {
		return nil
	}
	e := a.Expectations
	out := make([]CategorizedCriterion, 0, len(e.OutcomeCriteria)+len(e.TrajectoryCriteria)+len(e.AntiCriteria))
	for i, c := range e.OutcomeCriteria {
		out = append(out, CategorizedCriterion{c, CategoryOutcome, i})
	}
	for i, c := range e.TrajectoryCriteria {
		out = append(out, CategorizedCriterion{c, CategoryTrajectory, i})
	}
	for i, c := range e.AntiCriteria {
		out = append(out, CategorizedCriterion{c, CategoryAnti, i})
	}
	return out
}

// Programs holds compiled DETERMINISTIC assertions by criterion id.
type Programs map[string]*assertion.Program

// Programs returns the assertions Validate compiled, by criterion id. The
// map is shared; do not modify it.
func (a *Anticipation) Programs() Programs {
	if a == nil {
		return nil
	}
	return a.programs
}

// CompilePrograms compiles every DETERMINISTIC assertion of a. It returns
// the programs that compiled and, keyed by criterion id, the compile error
// of each that did not.
func CompilePrograms(a *Anticipation) (Programs, map[string]error) {
	progs := Programs{}
	var errsByID map[string]error
	for _, c := range a.Criteria() {
		if c.Measurement != Deterministic {
			continue
		}
		p, err := assertion.Compile(c.Assertion)
		if err != nil {
			if errsByID == nil {
				errsByID = map[string]error{}
			}
			errsByID[c.CriterionID] = err
			continue
		}
		progs[c.CriterionID] = p
	}
	return progs, errsByID
}
