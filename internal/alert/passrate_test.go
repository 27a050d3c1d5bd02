package alert

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
)

func TestPassRateWindow(t *testing.T) {
	threshold := 0.9
	r := Rule{On: []EventType{PassRateBelow}, Threshold: &threshold, Window: "PT1H", MinPlans: 5}
	var w PassRateWindow
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	var fired, recovered []*Occurrence
	count := func(at time.Time, passed bool) {
		switch occ := w.Count(r, "a", "r1", at, at, passed); {
		case occ == nil:
		case occ.Event.Type == PassRateBelow:
			fired = append(fired, occ)
		default:
			recovered = append(recovered, occ)
		}
	}
	for i := range 4 {
		count(t0.Add(time.Duration(i)*time.Second), false)
	}
	if len(fired) != 0 {
		t.Fatal("fired under minPlans")
	}
	count(t0.Add(5*time.Second), false)
	if len(fired) != 1 || *fired[0].Event.Data.PassRate != 0 || fired[0].Event.Data.Plans != 5 || w.Pending != fired[0] {
		t.Fatalf("fired %+v", fired)
	}
	for i := range 44 {
		count(t0.Add(time.Minute+time.Duration(i)*time.Second), true)
	}
	if len(recovered) != 0 {
		t.Fatalf("recovered at 44 of 49 passing: %+v", recovered)
	}
	count(t0.Add(2*time.Minute), true)
	if len(recovered) != 1 || *recovered[0].Event.Data.PassRate != 0.9 || recovered[0].Incident != fired[0].Incident || recovered[0].Key == fired[0].Key {
		t.Fatalf("recovered %+v", recovered)
	}
	// An hour later the failures have left the window: one more failure
	// and the rate is over the 45 passes that are left… until they leave
	// too.
	count(t0.Add(61*time.Minute+30*time.Second), false)
	if len(fired) != 1 {
		t.Fatal("fired again while the rate over the window is 45 of 46")
	}
	count(t0.Add(3*time.Hour), false)
	count(t0.Add(3*time.Hour), false)
	count(t0.Add(3*time.Hour), false)
	count(t0.Add(3*time.Hour), false)
	if len(fired) != 1 {
		t.Fatal("fired under minPlans once the window emptied")
	}
	count(t0.Add(3*time.Hour), false)
	if len(fired) != 2 || fired[1].Incident == fired[0].Incident || len(w.Buckets) != 1 {
		t.Fatalf("a second firing: %+v, buckets %v", fired, w.Buckets)
	}
	b, _ := json.Marshal(w)
	if len(b) > 4096 {
		t.Errorf("the state is %d bytes", len(b))
	}
}

func TestPassRateOf(t *testing.T) {
	v := &anticipate.Verification{Verdict: anticipate.VerdictFail, Results: []anticipate.Result{
		{CriterionID: "a", Status: anticipate.StatusPass}, {CriterionID: "b", Status: anticipate.StatusPending}}}
	for _, c := range []struct {
		criterion       string
		counted, passed bool
	}{{"", true, false}, {"a", true, true}, {"b", false, false}, {"c", false, false}} {
		if counted, passed := PassRateOf(Rule{CriterionID: c.criterion}, v); counted != c.counted || passed != c.passed {
			t.Errorf("%q: %v %v", c.criterion, counted, passed)
		}
	}
}

func TestPassRateRules(t *testing.T) {
	usable := func(string) bool { return true }
	for _, c := range []struct {
		body, path string
	}{
		{`{"rules":[{"on":["evaluation.pass_rate_below"],"channels":["c"],"window":"PT1H"}]}`, "rules[0].threshold"},
		{`{"rules":[{"on":["evaluation.pass_rate_below"],"channels":["c"],"threshold":1.5,"window":"PT1H"}]}`, "rules[0].threshold"},
		{`{"rules":[{"on":["evaluation.pass_rate_below"],"channels":["c"],"threshold":0.9}]}`, "rules[0].window"},
		{`{"rules":[{"on":["evaluation.pass_rate_below"],"channels":["c"],"threshold":0.9,"window":"P30D"}]}`, "rules[0].window"},
		{`{"rules":[{"on":["evaluation.pass_rate_below","verification.failed"],"channels":["c"],"threshold":0.9,"window":"PT1H"}]}`, "rules[0].on"},
		{`{"rules":[{"on":["verification.failed"],"channels":["c"],"threshold":0.9}]}`, "rules[0]"},
		{`{"rules":[{"on":["evaluation.pass_rate_below"],"channels":["c"],"threshold":0.9,"window":"PT1H","minPlans":-1}]}`, "rules[0].minPlans"},
	} {
		_, err := ParseRules("a", []byte(c.body), usable)
		e, ok := err.(*errs.Error)
		if !ok || len(e.Fields) == 0 || e.Fields[0].Path != c.path {
			t.Errorf("%s: %v, want a field error at %s", c.body, err, c.path)
		}
	}
	if _, err := ParseRules("a", []byte(`{"rules":[{"on":["evaluation.pass_rate_below"],"channels":["c"],"threshold":0.9,"window":"PT1H","criterionId":"oc-1"}]}`), usable); err != nil {
		t.Fatal(err)
	}
}
