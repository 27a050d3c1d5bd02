package regrade

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
)

const detCrit = `{"criterion_id":"few","description":"few steps","measurement":"DETERMINISTIC","assertion":"step_count <= 5","weight":1}`

func TestParseEvaluator(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		fields     []string
	}{
		{"minimal", `{"criteria":[` + detCrit + `],"sample":0.1}`, nil},
		{"null policy", `{"criteria":[` + detCrit + `],"sample":0.1,"gradingPolicy":null}`, nil},
		{"filtered", `{"criteria":[` + detCrit + `],"sample":1,"filter":{"planIdPrefix":"support-","scopeEnvelopeId":"scope-1"}}`, nil},
		{"no sample", `{"criteria":[` + detCrit + `]}`, []string{"sample"}},
		{"sample 0", `{"criteria":[` + detCrit + `],"sample":0}`, []string{"sample"}},
		{"sample over 1", `{"criteria":[` + detCrit + `],"sample":1.5}`, []string{"sample"}},
		{"no criteria", `{"sample":0.1}`, []string{"criteria"}},
		{"human", `{"criteria":[{"criterion_id":"h","description":"d","measurement":"HUMAN","assertion":"a person says so","weight":1}],"sample":0.1}`, []string{"criteria[0].measurement"}},
		{"bad assertion", `{"criteria":[{"criterion_id":"x","description":"d","measurement":"DETERMINISTIC","assertion":"step_count <=","weight":1}],"sample":0.1}`, []string{"criteria[0].assertion"}},
		{"bad filter", `{"criteria":[` + detCrit + `],"sample":0.1,"filter":{"planIdPrefix":"a\u0001"}}`, []string{"filter.planIdPrefix"}},
		{"unknown field", `{"criteria":[` + detCrit + `],"sample":0.1,"rate":1}`, []string{"body"}},
		{"trailing", `{"criteria":[` + detCrit + `],"sample":0.1} {}`, []string{"body"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := ParseEvaluator("agent-1", "tone", []byte(tc.body))
			var got []string
			if fe, ok := err.(*errs.Error); ok {
				for _, f := range fe.Fields {
					got = append(got, f.Path)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Fatalf("fields %v, want %v (%v)", got, tc.fields, err)
			}
			if err == nil && (e.Spec.Policy == nil || e.Body.GradingPolicy != nil && string(e.Body.GradingPolicy) == "null") {
				t.Fatalf("no default policy, or a null one kept: %+v", e.Body)
			}
		})
	}
	if _, err := ParseEvaluator("agent-1", "bad name", []byte(`{"criteria":[`+detCrit+`],"sample":0.1}`)); err == nil {
		t.Fatal("a bad name was accepted")
	}
}

// TestEvaluatorSampleAndAnticipation: the draw is deterministic and near
// its rate (1,000 plans at 0.1 land within four standard deviations of
// 100), and the stand-in ANTICIPATE validates as the server's, with the
// default policy.
func TestEvaluatorSampleAndAnticipation(t *testing.T) {
	e, err := ParseEvaluator("agent-1", "tone", []byte(`{"criteria":[`+detCrit+`],"sample":0.1,"filter":{"planIdPrefix":"p-"}}`))
	if err != nil {
		t.Fatal(err)
	}
	again, _ := ParseEvaluator("agent-1", "tone", []byte(`{"criteria":[`+detCrit+`],"sample":0.1}`))
	other, _ := ParseEvaluator("agent-1", "other", []byte(`{"criteria":[`+detCrit+`],"sample":0.1}`))
	n, differ := 0, 0
	for i := range 1000 {
		plan := fmt.Sprintf("p-%04d", i)
		picked := e.Sampled("agent-1", plan)
		if picked != again.Sampled("agent-1", plan) {
			t.Fatal("the draw is not deterministic")
		}
		if picked != other.Sampled("agent-1", plan) {
			differ++
		}
		if picked {
			n++
		}
	}
	if differ == 0 {
		t.Fatal("two evaluators draw the same sample")
	}
	if n < 62 || n > 138 {
		t.Fatalf("sampled %d of 1,000 at 0.1", n)
	}
	if !e.Matches("p-1", "any") || e.Matches("q-1", "any") {
		t.Fatal("the filter does not match as it should")
	}
	raw, err := e.Anticipation("agent-1", "p-0001", time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	a, err := anticipate.Validate(raw)
	if err != nil {
		t.Fatal(err)
	}
	if a.Emitter != anticipate.EmitterExternalEvaluator || a.AnticipationID != "evaluator:tone" || a.GradingPolicy.PassingThreshold != 0.5 || a.GradingPolicy.GraderType != anticipate.GraderCode {
		t.Fatalf("stand-in ANTICIPATE %+v", a)
	}
}
