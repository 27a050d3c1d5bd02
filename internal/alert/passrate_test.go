package alert

import (
	"encoding/json"
	"fmt"
	"strings"
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

// TestPassRateRecoversOnlyWithEnoughPlans: after the failures left the
// window, one passing plan does not resolve the incident; minPlans do.
func TestPassRateRecoversOnlyWithEnoughPlans(t *testing.T) {
	threshold := 0.9
	r := Rule{On: []EventType{PassRateBelow}, Threshold: &threshold, Window: "PT1H", MinPlans: 5}
	var w PassRateWindow
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for i := range 5 {
		w.Count(r, "a", "r", t0.Add(time.Duration(i)*time.Second), t0.Add(time.Duration(i)*time.Second), false)
	}
	later := t0.Add(2 * time.Hour)
	for i := range 4 {
		if occ := w.Count(r, "a", "r", later, later, true); occ != nil && occ.Event.Type == PassRateRecovered {
			t.Fatalf("recovered on %d passing plans", i+1)
		}
	}
	if occ := w.Count(r, "a", "r", later, later, true); occ == nil || occ.Event.Type != PassRateRecovered {
		t.Fatalf("not recovered on 5 of 5: %+v", occ)
	}
	// Editing the rule's channels keeps its state; its threshold does not.
	r2 := r
	r2.Channels = []string{"another"}
	if r.PassRateID() != r2.PassRateID() {
		t.Error("a channel edit changes the rule's state")
	}
	t2 := 0.8
	r2.Threshold = &t2
	if r.PassRateID() == r2.PassRateID() {
		t.Error("a threshold edit keeps the rule's state")
	}
}

// TestFromVerificationTrimsALargeVERIFY: a VERIFY too large for a
// notification's item is carried with its evidence and rationales cut.
func TestFromVerificationTrimsALargeVERIFY(t *testing.T) {
	v := &anticipate.Verification{VerificationID: "v1", AgentID: "a", PlanID: "p", Verdict: anticipate.VerdictPass}
	for i := range 200 {
		v.Results = append(v.Results, anticipate.Result{CriterionID: fmt.Sprintf("c%d", i), Status: anticipate.StatusPass,
			Evidence: strings.Repeat("e", 2000), Rationale: strings.Repeat("é", 1000)})
	}
	raw, _ := json.Marshal(v)
	occ := FromVerification("", v, raw)
	if len(occ) != 1 || len(occ[0].Event.Data.Verification) > MaxNotifiedVerification {
		t.Fatalf("%d bytes carried", len(occ[0].Event.Data.Verification))
	}
	var got anticipate.Verification
	if err := json.Unmarshal(occ[0].Event.Data.Verification, &got); err != nil || len(got.Results) != 200 || !strings.HasSuffix(got.Results[0].Rationale, "…") {
		t.Fatalf("%v %+v", err, got.Results[0])
	}
}
