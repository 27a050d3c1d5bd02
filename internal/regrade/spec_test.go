package regrade

import (
	"encoding/json"
	"testing"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
)

func criteria(list ...string) []json.RawMessage {
	var out []json.RawMessage
	for _, s := range list {
		out = append(out, json.RawMessage(s))
	}
	return out
}

const good = `{"criterion_id":"c1","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <= 3","weight":1}`

// TestParseNamesTheRequestsFields: each refusal names the field as the
// request spelled it, not as the ANTICIPATE built from it would.
func TestParseNamesTheRequestsFields(t *testing.T) {
	agent := Filter{AgentID: "a1"}
	for _, tc := range []struct {
		name string
		req  Request
		want []string
	}{
		{"no filter", Request{Criteria: criteria(good)}, []string{"filter"}},
		{"no criteria", Request{Filter: agent}, []string{"criteria"}},
		{"bad window", Request{Filter: Filter{AgentID: "a1", From: "2026-12-02T00:00:00Z", To: "2026-12-01T00:00:00Z"}, Criteria: criteria(good)}, []string{"filter.to"}},
		{"bad from", Request{Filter: Filter{AgentID: "a1", From: "yesterday"}, Criteria: criteria(good)}, []string{"filter.from"}},
		{"repeated plan", Request{Filter: Filter{PlanIDs: []string{"p", "p"}}, Criteria: criteria(good)}, []string{"filter.planIds[1]"}},
		{"assertion", Request{Filter: agent, Criteria: criteria(good, `{"criterion_id":"c2","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <=","weight":1,"category":"anti"}`)}, []string{"criteria[1].assertion"}},
		{"category", Request{Filter: agent, Criteria: criteria(`{"criterion_id":"c2","description":"d","measurement":"DETERMINISTIC","assertion":"true","weight":1,"category":"side"}`)}, []string{"criteria[0].category"}},
		{"unknown field", Request{Filter: agent, Criteria: criteria(good, `{"criterion_id":"c2","description":"d","measurement":"DETERMINISTIC","assertion":"true","weight":1,"pass_if":"always"}`)}, []string{"criteria[1].pass_if"}},
		{"duplicate id", Request{Filter: agent, Criteria: criteria(good, good)}, []string{"criteria[1].criterion_id"}},
		{"duplicate id across categories", Request{Filter: agent, Criteria: criteria(`{"criterion_id":"c1","description":"d","measurement":"DETERMINISTIC","assertion":"true","weight":1,"category":"anti"}`, good)}, []string{"criteria[1].criterion_id"}},
		{"human", Request{Filter: agent, Criteria: criteria(`{"criterion_id":"c2","description":"d","measurement":"HUMAN","assertion":"a person says so","weight":1}`)}, []string{"criteria[0].measurement"}},
		{"policy", Request{Filter: agent, Criteria: criteria(good), GradingPolicy: json.RawMessage(`{"grader_type":"CODE","passing_threshold":2,"weighted_scoring":true,"fail_on_any_anti_criteria":true}`)}, []string{"gradingPolicy.passing_threshold"}},
		{"policy measurement", Request{Filter: agent, Criteria: criteria(`{"criterion_id":"h","description":"d","measurement":"HEURISTIC","assertion":"reads well","weight":1}`), GradingPolicy: json.RawMessage(`{"grader_type":"CODE","passing_threshold":0.5,"weighted_scoring":true,"fail_on_any_anti_criteria":true}`)}, []string{"criteria[0].measurement"}},
		{"judge", Request{Filter: agent, Criteria: criteria(good), Judge: &JudgeOverride{}}, []string{"judge.model"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.req)
			e, ok := err.(*errs.Error)
			if !ok {
				t.Fatalf("err %v, want field errors %v", err, tc.want)
			}
			var got []string
			for _, f := range e.Fields {
				got = append(got, f.Path)
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] {
				t.Errorf("fields %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestParseAndBuild(t *testing.T) {
	s, err := Parse(Request{Filter: Filter{AgentID: "a1"}, Criteria: criteria(good,
		`{"criterion_id":"h","description":"d","measurement":"HEURISTIC","assertion":"reads well","weight":0.5,"category":"trajectory"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if !s.Heuristic || len(s.Criteria.OutcomeCriteria) != 1 || len(s.Criteria.TrajectoryCriteria) != 1 || s.Policy != nil {
		t.Fatalf("spec %+v", s)
	}
	// A plan that declared no ANTICIPATE needs the request's policy.
	if _, err := Anticipation(Plan{AgentID: "a1", PlanID: "p"}, "evl-1", s.From, s); !errs.Is(err, errs.Invalid) {
		t.Errorf("no policy: %v", err)
	}
	orig := &anticipate.Anticipation{ProtocolVersion: "4.1", AppID: "app", ScopeEnvelopeID: "scope", SessionID: "sess",
		GradingPolicy: anticipate.GradingPolicy{GraderType: anticipate.GraderCode, PassingThreshold: 0.8, WeightedScoring: true}}
	raw, err := Anticipation(Plan{AgentID: "a1", PlanID: "p", Original: orig}, "evl-1", s.From, s)
	if err != nil {
		t.Fatal(err)
	}
	a, err := anticipate.Validate(raw)
	if err != nil {
		t.Fatalf("the built ANTICIPATE does not validate: %v\n%s", err, raw)
	}
	if a.EffectiveEmitter() != anticipate.EmitterExternalEvaluator || a.AnticipationID != "evl-1" || a.PlanID != "p" || a.AppID != "app" ||
		a.GradingPolicy.PassingThreshold != 0.8 || a.GradingPolicy.GraderType != anticipate.GraderComposite {
		t.Errorf("built %+v", a)
	}
}

func TestTally(t *testing.T) {
	one, half := 1.0, 0.5
	var tl Tally
	tl.Add(Result{PlanID: "a", Verdict: anticipate.VerdictPass, Score: &one, OriginalVerdict: anticipate.VerdictFail,
		Criteria: []anticipate.Result{{CriterionID: "c", Status: anticipate.StatusPass, Score: &one}}})
	tl.Add(Result{PlanID: "b", Verdict: anticipate.VerdictFail, Score: &half, OriginalVerdict: anticipate.VerdictFail,
		Criteria: []anticipate.Result{{CriterionID: "c", Status: anticipate.StatusFail, Score: &half}}})
	tl.Add(Result{PlanID: "c", Error: "gone"})
	s := tl.Summary()
	if *s.PassRate != 0.5 || *s.MeanScore != 0.75 || s.Errors != 1 || s.ChangedCount != 1 || s.Changed[0] != "a" ||
		*s.PerCriterion["c"].PassRate != 0.5 {
		t.Errorf("summary %+v", s)
	}
}
