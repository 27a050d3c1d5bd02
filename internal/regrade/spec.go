// Package regrade is the domain of re-grading stored executions against
// criteria given after the fact (POST /v1/evaluations): the request's
// rules, the ANTICIPATE each plan is graded against, and the summary of a
// job's results. It does no I/O; package evaluation loads the plans, runs
// the grading and stores the results.
//
// A re-grade is graded by the same code as a VERIFY (anticipate.Grade over
// the plan's stored aggregate), against an ANTICIPATE built from the
// request: so its results equal a fresh VERIFY of the same events against
// the same criteria. That ANTICIPATE names the emitter
// "external_evaluator" (RFC-032 3.6) and is never stored as a declaration:
// a re-grade neither seals nor changes anything the plan declared.
package regrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
)

// MaxPlans bounds the plans one evaluation grades: a filter that matches
// more is refused (narrow it, or split it into several evaluations).
const MaxPlans = 10000

// MaxPlanIDs bounds filter.planIds.
const MaxPlanIDs = 1000

// Request is the body of POST /v1/evaluations.
type Request struct {
	Filter Filter `json:"filter"`
	// Criteria are criteria as an ANTICIPATE declares them, each with an
	// optional "category" (outcome, trajectory or anti; default outcome),
	// since a flat list has no category arrays to say it.
	Criteria []json.RawMessage `json:"criteria"`
	// GradingPolicy is an RFC-032 grading_policy; absent, each plan's
	// own (its first ANTICIPATE's) passing_threshold, weighted_scoring
	// and fail_on_any_anti_criteria apply.
	GradingPolicy json.RawMessage `json:"gradingPolicy,omitempty"`
	// Judge overrides the configured model judge for HEURISTIC criteria.
	Judge *JudgeOverride `json:"judge,omitempty"`
}

// Filter selects the stored executions to grade: completed plans of
// AgentID whose PLAN_COMPLETE is within [From, To), or the plans named.
type Filter struct {
	AgentID string   `json:"agentId,omitempty"`
	From    string   `json:"from,omitempty"`
	To      string   `json:"to,omitempty"`
	PlanIDs []string `json:"planIds,omitempty"`
}

// JudgeOverride names another model for the configured judge (OpenAI's
// model or Bedrock's model id); the endpoint and credentials stay the
// server's, so a request can never point the judge elsewhere.
type JudgeOverride struct {
	Model string `json:"model"`
}

// Spec is a validated request.
type Spec struct {
	Filter   Filter
	From, To time.Time // zero: unbounded
	// Criteria is the expectations object the ANTICIPATEs carry.
	Criteria anticipate.Expectations
	// Policy is the request's policy, nil for each plan's own.
	Policy *anticipate.GradingPolicy
	// JudgeModel is the judge override's model ("" for the configured).
	JudgeModel string
	// Heuristic tells whether any criterion needs the model judge.
	Heuristic bool
}

// placeholderPolicy stands in for the plans' own policies while the
// criteria are validated at the start (it allows every measurement).
var placeholderPolicy = anticipate.GradingPolicy{GraderType: anticipate.GraderComposite, PassingThreshold: 0.5, WeightedScoring: false}

// Parse validates a request. Errors are Invalid, naming each failing field
// by its path in the request (criteria[2].assertion, gradingPolicy.passing_threshold,
// filter.from): no filter, from after to, a planIds list too long or with
// repeats or empty ids, no criteria or a criterion as an ANTICIPATE would
// refuse it, a HUMAN criterion (no job can wait for a person), an unknown
// category, a policy an ANTICIPATE would refuse, an empty judge model.
func Parse(req Request) (Spec, error) {
	var c errs.Collector
	var s Spec
	s.Filter = req.Filter
	f := req.Filter
	if f.AgentID == "" && len(f.PlanIDs) == 0 {
		c.Add("filter", "must name agentId or planIds: an evaluation grades the stored plans of one agent, or the plans named")
	}
	if f.AgentID != "" && !validID(f.AgentID) {
		c.Add("filter.agentId", "must be 1 to 128 bytes without control characters")
	}
	for _, p := range []struct {
		name string
		val  string
		at   *time.Time
	}{{"filter.from", f.From, &s.From}, {"filter.to", f.To, &s.To}} {
		if p.val == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, p.val)
		if err != nil {
			c.Add(p.name, "must be an RFC 3339 date-time such as 2026-12-01T00:00:00Z")
			continue
		}
		*p.at = t.UTC()
	}
	if !s.From.IsZero() && !s.To.IsZero() && !s.From.Before(s.To) {
		c.Add("filter.to", "must be after filter.from")
	}
	if len(f.PlanIDs) > MaxPlanIDs {
		c.Add("filter.planIds", "names %d plans; at most %d per evaluation", len(f.PlanIDs), MaxPlanIDs)
	} else {
		seen := map[string]bool{}
		for i, id := range f.PlanIDs {
			switch {
			case !validID(id):
				c.Add(fmt.Sprintf("filter.planIds[%d]", i), "must be 1 to 128 bytes without control characters")
			case seen[id]:
				c.Add(fmt.Sprintf("filter.planIds[%d]", i), "repeats %q", id)
			}
			seen[id] = true
		}
	}
	if req.Judge != nil {
		if strings.TrimSpace(req.Judge.Model) == "" || len(req.Judge.Model) > 256 {
			c.Add("judge.model", "must name a model (1 to 256 bytes)")
		}
		s.JudgeModel = req.Judge.Model
	}
	var policy anticipate.GradingPolicy
	if len(req.GradingPolicy) > 0 && string(req.GradingPolicy) != "null" {
		s.Policy = &policy
	}
	exp, where, ok := group(&c, req.Criteria)
	if ok {
		raw, err := build(Plan{AgentID: "validation", PlanID: "validation"}, "validation", time.Unix(0, 0), exp, req.GradingPolicy, s.Policy == nil)
		if err != nil {
			return Spec{}, err
		}
		a, err := anticipate.Validate(raw)
		if err != nil {
			var e *errs.Error
			if !errors.As(err, &e) {
				return Spec{}, err
			}
			for _, fe := range e.Fields {
				c.Add(requestPath(fe.Path, where), "%s", fe.Message)
			}
		} else {
			s.Criteria = a.Expectations
			policy = a.GradingPolicy
			for _, cr := range a.Criteria() {
				switch cr.Measurement {
				case anticipate.Human:
					c.Add(where[key{cr.Category, cr.Index}]+".measurement", "is HUMAN, which an evaluation cannot wait for: grade such a criterion with POST /v1/verifications/{id}/grades")
				case anticipate.Heuristic:
					s.Heuristic = true
				}
				if cr.Queue != "" {
					c.Add(where[key{cr.Category, cr.Index}]+".queue", "is not used by an evaluation: its results are the judge's and the assertions', never sent to a review queue")
				}
			}
		}
	}
	if err := c.Err("invalid evaluation"); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// key names a criterion by category and index within it.
type key struct {
	cat anticipate.Category
	i   int
}

var categoryField = map[anticipate.Category]string{
	anticipate.CategoryOutcome:    "outcome_criteria",
	anticipate.CategoryTrajectory: "trajectory_criteria",
	anticipate.CategoryAnti:       "anti_criteria",
}

// group sorts the flat criteria into the ANTICIPATE's three categories and
// returns where each came from in the request.
func group(c *errs.Collector, criteria []json.RawMessage) (map[string][]json.RawMessage, map[key]string, bool) {
	if len(criteria) == 0 {
		c.Add("criteria", "is required: at least one criterion to grade with")
		return nil, nil, false
	}
	if len(criteria) > anticipate.MaxCriteria {
		c.Add("criteria", "has %d criteria; at most %d", len(criteria), anticipate.MaxCriteria)
		return nil, nil, false
	}
	exp := map[string][]json.RawMessage{}
	where := map[key]string{}
	seen := map[string]int{} // criterion id -> its first index in the request
	ok := true
	for i, raw := range criteria {
		path := fmt.Sprintf("criteria[%d]", i)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			c.Add(path, "must be a criterion object")
			ok = false
			continue
		}
		// Repeated ids are named here, in the request's order (the
		// ANTICIPATE's check would go category by category).
		var id string
		if json.Unmarshal(m["criterion_id"], &id) == nil && id != "" {
			if first, dup := seen[id]; dup {
				c.Add(path+".criterion_id", "%q is already used by criteria[%d]; criterion ids must be unique", id, first)
				ok = false
				continue
			}
			seen[id] = i
		}
		cat := anticipate.CategoryOutcome
		if v, sent := m["category"]; sent {
			var s string
			_ = json.Unmarshal(v, &s)
			cat = anticipate.Category(s)
			if _, known := categoryField[cat]; !known {
				c.Add(path+".category", "must be one of outcome, trajectory, anti")
				ok = false
				continue
			}
			delete(m, "category")
		}
		b, err := json.Marshal(m)
		if err != nil {
			c.Add(path, "must be a criterion object")
			ok = false
			continue
		}
		f := categoryField[cat]
		where[key{cat, len(exp[f])}] = path
		exp[f] = append(exp[f], b)
	}
	return exp, where, ok
}

// requestPath maps a path of the built ANTICIPATE to the request's.
func requestPath(p string, where map[key]string) string {
	switch {
	case p == "expectations":
		return "criteria"
	case strings.HasPrefix(p, "grading_policy"):
		return "gradingPolicy" + strings.TrimPrefix(p, "grading_policy")
	case strings.HasPrefix(p, "expectations."):
		rest := strings.TrimPrefix(p, "expectations.")
		for cat, f := range categoryField {
			if !strings.HasPrefix(rest, f+"[") {
				continue
			}
			idx, tail, ok := strings.Cut(rest[len(f)+1:], "]")
			if i, err := strconv.Atoi(idx); ok && err == nil {
				if w, ok := where[key{cat, i}]; ok {
					return w + tail
				}
			}
			return "criteria"
		}
		return "criteria"
	}
	return p
}

func validID(s string) bool {
	if s == "" || len(s) > anticipate.MaxIDLen {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// Plan is one stored execution to grade, with what its first ANTICIPATE
// (if any) said.
type Plan struct {
	AgentID, PlanID string
	// Original is the plan's first ANTICIPATE, nil when it declared none.
	Original *anticipate.Anticipation
}

// Anticipation returns the ANTICIPATE a plan is re-graded against, signed
// (d_dna_signature), for anticipate.Validate: the request's criteria and
// policy (or the plan's own policy), anticipation_id the evaluation's id,
// emitter external_evaluator, and the plan's app, scope and session when
// it declared them. Errors are Invalid when the plan declared no policy
// and the evaluation gives none.
func Anticipation(p Plan, evaluationID string, at time.Time, s Spec) ([]byte, error) {
	exp := map[string][]json.RawMessage{}
	for _, cc := range []struct {
		f    string
		list []anticipate.Criterion
	}{{"outcome_criteria", s.Criteria.OutcomeCriteria}, {"trajectory_criteria", s.Criteria.TrajectoryCriteria}, {"anti_criteria", s.Criteria.AntiCriteria}} {
		for _, cr := range cc.list {
			b, err := json.Marshal(cr)
			if err != nil {
				return nil, err
			}
			exp[cc.f] = append(exp[cc.f], b)
		}
	}
	var policy json.RawMessage
	switch {
	case s.Policy != nil:
		policy, _ = json.Marshal(s.Policy)
	case p.Original != nil:
		own := p.Original.GradingPolicy
		own.GraderType = graderFor(s.Criteria)
		policy, _ = json.Marshal(own)
	default:
		return nil, errs.E(errs.Invalid, "plan %q declared no ANTICIPATE, so it has no grading policy of its own: give gradingPolicy", p.PlanID)
	}
	return build(p, evaluationID, at, exp, policy, false)
}

// graderFor is the grader_type that allows every criterion's measurement.
func graderFor(e anticipate.Expectations) anticipate.GraderType {
	all := slices.Concat(e.OutcomeCriteria, e.TrajectoryCriteria, e.AntiCriteria)
	if !slices.ContainsFunc(all, func(c anticipate.Criterion) bool { return c.Measurement != anticipate.Deterministic }) {
		return anticipate.GraderCode
	}
	return anticipate.GraderComposite
}

// build writes the ANTICIPATE message and signs it. placeholder stands the
// policy in with placeholderPolicy (the request gave none).
func build(p Plan, evaluationID string, at time.Time, exp map[string][]json.RawMessage, policy json.RawMessage, placeholder bool) ([]byte, error) {
	if placeholder {
		policy, _ = json.Marshal(placeholderPolicy)
	}
	version, app, scope, session := "4.1", "clockwork-evaluation", evaluationID, evaluationID
	if o := p.Original; o != nil {
		version, app, scope, session = o.ProtocolVersion, o.AppID, o.ScopeEnvelopeID, o.SessionID
	}
	for _, f := range categoryField {
		if exp[f] == nil {
			exp[f] = []json.RawMessage{}
		}
	}
	msg := map[string]any{
		"protocol_version":  version,
		"message_type":      anticipate.MessageTypeAnticipate,
		"emitter":           anticipate.EmitterExternalEvaluator,
		"app_id":            app,
		"agent_id":          p.AgentID,
		"anticipation_id":   evaluationID,
		"plan_id":           p.PlanID,
		"scope_envelope_id": scope,
		"session_id":        session,
		"timestamp":         at.UTC().Format(time.RFC3339Nano),
		"expectations":      exp,
		"grading_policy":    policy,
	}
	raw, err := json.Marshal(msg)
	if err != nil {
		return nil, err
	}
	return anticipate.Sign(raw)
}
