package regrade

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
)

// An online evaluator grades a sample of an agent's completed plans that
// declared no ANTICIPATE, with criteria configured on the server (as
// AgentCore's and Langfuse's online evaluators do). Its VERIFYs say they
// were sampled and carry no anticipation digest: nothing was declared
// before the run.

// EvaluatorBody is the body of PUT /v1/agents/{agentId}/evaluators/{name}.
type EvaluatorBody struct {
	// Criteria are as in an evaluation (Request.Criteria): criteria as an
	// ANTICIPATE declares them, each with an optional category.
	Criteria []json.RawMessage `json:"criteria"`
	// GradingPolicy is an RFC-032 grading_policy; absent, DefaultPolicy.
	GradingPolicy json.RawMessage `json:"gradingPolicy,omitempty"`
	// Sample is the share of matching plans graded, in (0, 1].
	Sample *float64 `json:"sample"`
	// Filter narrows the plans graded (empty: every plan of the agent
	// that declared no ANTICIPATE).
	Filter EvaluatorFilter `json:"filter,omitempty"`
}

// EvaluatorFilter narrows the plans an evaluator grades: plan ids with a
// prefix, and plans run under one scope envelope.
type EvaluatorFilter struct {
	PlanIDPrefix    string `json:"planIdPrefix,omitempty"`
	ScopeEnvelopeID string `json:"scopeEnvelopeId,omitempty"`
}

// Matches reports whether a plan (its id and scope envelope) passes f.
func (f EvaluatorFilter) Matches(planID, scopeEnvelopeID string) bool {
	return strings.HasPrefix(planID, f.PlanIDPrefix) && (f.ScopeEnvelopeID == "" || f.ScopeEnvelopeID == scopeEnvelopeID)
}

// MaxEvaluatorBody bounds an evaluator's body, in bytes: its criteria are
// kept with every VERIFY it makes.
const MaxEvaluatorBody = 64 << 10

// Evaluator is a validated evaluator: its body and what Parse made of it.
type Evaluator struct {
	Name string
	Body EvaluatorBody
	Spec Spec
}

var evaluatorName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidEvaluatorName returns "" for a valid evaluator name, else why not.
func ValidEvaluatorName(name string) string {
	if !evaluatorName.MatchString(name) {
		return "must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
	}
	return ""
}

// DefaultPolicy is an evaluator's grading policy when it gives none: a
// plan passes at a score of 0.5, criteria weighed (unless every weight is
// 0: then a plain mean), any failed anti criterion failing it; the grader
// type allows every criterion.
func DefaultPolicy(criteria anticipate.Expectations) anticipate.GradingPolicy {
	weighted := slices.ContainsFunc(slices.Concat(criteria.OutcomeCriteria, criteria.TrajectoryCriteria, criteria.AntiCriteria),
		func(c anticipate.Criterion) bool { return c.Weight > 0 })
	return anticipate.GradingPolicy{GraderType: graderFor(criteria), PassingThreshold: 0.5, WeightedScoring: weighted, FailOnAnyAntiCriteria: true}
}

// ParseEvaluator validates a PUT body for evaluator name of agentID.
// Errors are Invalid naming each failing field by its path in the body
// (criteria[1].assertion, sample, filter.planIdPrefix): the criteria and
// the policy as an evaluation would refuse them (HUMAN criteria too: a
// sample cannot wait for a person), a sample outside (0, 1], a filter
// field that is not an id.
func ParseEvaluator(agentID, name string, body []byte) (Evaluator, error) {
	if len(body) > MaxEvaluatorBody {
		return Evaluator{}, errs.Fields("the body is too large", []errs.FieldError{{Path: "criteria",
			Message: fmt.Sprintf("the evaluator is %d bytes; at most %d, since its criteria are kept with every VERIFY it makes", len(body), MaxEvaluatorBody)}})
	}
	var b EvaluatorBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(&b)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("holds more than one JSON value")
		}
	}
	if err != nil {
		return Evaluator{}, errs.Fields("the body is not an evaluator", []errs.FieldError{{Path: "body", Message: strings.TrimPrefix(err.Error(), "json: ")}})
	}
	if string(bytes.TrimSpace(b.GradingPolicy)) == "null" {
		b.GradingPolicy = nil // as if absent: the default policy
	}
	var c errs.Collector
	if msg := ValidEvaluatorName(name); msg != "" {
		c.Add("name", "%s", msg)
	}
	switch {
	case b.Sample == nil:
		c.Add("sample", "is required: the share of matching plans graded, e.g. 0.1")
	case math.IsNaN(*b.Sample) || *b.Sample <= 0 || *b.Sample > 1:
		c.Add("sample", "must be more than 0 and at most 1")
	}
	for _, f := range []struct{ path, v string }{{"filter.planIdPrefix", b.Filter.PlanIDPrefix}, {"filter.scopeEnvelopeId", b.Filter.ScopeEnvelopeID}} {
		if f.v != "" && !validID(f.v) {
			c.Add(f.path, "must be 1 to 128 bytes without control characters")
		}
	}
	spec, perr := Parse(Request{Filter: Filter{AgentID: agentID}, Criteria: b.Criteria, GradingPolicy: b.GradingPolicy})
	var pe *errs.Error
	switch {
	case errors.As(perr, &pe):
		for _, f := range pe.Fields {
			c.Add(f.Path, "%s", f.Message)
		}
	case perr != nil:
		return Evaluator{}, perr
	}
	if err := c.Err("invalid evaluator"); err != nil {
		return Evaluator{}, err
	}
	if spec.Policy == nil {
		p := DefaultPolicy(spec.Criteria)
		spec.Policy = &p
	}
	e := Evaluator{Name: name, Body: b, Spec: spec}
	// The stand-in it will grade against must validate as it will be
	// built (with the default policy, when it gives none).
	raw, err := e.Anticipation(agentID, "validation", time.Unix(0, 0))
	if err == nil {
		_, err = anticipate.Validate(raw)
	}
	if err != nil {
		var fe *errs.Error
		msg := err.Error()
		if errors.As(err, &fe) && len(fe.Fields) > 0 {
			msg = fe.Fields[0].Path + ": " + fe.Fields[0].Message
		}
		return Evaluator{}, errs.Fields("invalid evaluator", []errs.FieldError{{Path: "gradingPolicy", Message: "with these criteria the policy cannot grade: " + msg}})
	}
	return e, nil
}

// Matches reports whether a plan that declared no ANTICIPATE is one e
// grades, sample aside.
func (e *Evaluator) Matches(planID, scopeEnvelopeID string) bool {
	return e.Body.Filter.Matches(planID, scopeEnvelopeID)
}

// Sampled reports whether plan planID of agentID falls in e's sample: a
// deterministic draw (a replayed completion decides as the first did),
// independent between evaluators.
func (e *Evaluator) Sampled(agentID, planID string) bool {
	sum := sha256.Sum256([]byte("sample\x00" + agentID + "\x00" + e.Name + "\x00" + planID))
	u := float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
	return u < *e.Body.Sample
}

// Anticipation returns the ANTICIPATE that stands for e's criteria when it
// grades plan planID of agentID at time at: emitter external_evaluator,
// anticipation_id "evaluator:<name>", signed; it was made by the server
// after the run, never declared before it.
func (e *Evaluator) Anticipation(agentID, planID string, at time.Time) ([]byte, error) {
	return Anticipation(Plan{AgentID: agentID, PlanID: planID}, "evaluator:"+e.Name, at, e.Spec)
}
