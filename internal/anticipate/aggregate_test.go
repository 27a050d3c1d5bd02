package anticipate

import (
	"encoding/json"
	"testing"
)

// TestAggregateMatchesBuildEnv folds the seed executions event by event
// (through a JSON round trip, as the store keeps it) and checks that the
// grade equals the one from BuildEnv over all events.
func TestAggregateMatchesBuildEnv(t *testing.T) {
	a, err := Validate(seedRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		steps   int
		removed bool
	}{{3, false}, {4, false}, {3, true}} {
		raws := seedEvents(t, c.steps, c.removed, nil)
		var evs []*Event
		var agg Aggregate
		for _, r := range raws {
			e, err := ValidateEvent(r)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
			agg.Add(e)
			b, _ := json.Marshal(agg)
			agg = Aggregate{}
			if err := json.Unmarshal(b, &agg); err != nil {
				t.Fatal(err)
			}
		}
		want := Grade(a, a.Programs(), BuildEnv(evs, nil), nil, Execution{PlanID: "p"}, t0)
		got := Grade(a, a.Programs(), agg.Env(nil), nil, Execution{PlanID: "p"}, t0)
		if want.Score != got.Score || want.Verdict != got.Verdict || len(want.Results) != len(got.Results) {
			t.Fatalf("steps %d removed %v: aggregate %v %s, events %v %s", c.steps, c.removed, got.Score, got.Verdict, want.Score, want.Verdict)
		}
		for i := range want.Results {
			if want.Results[i].Status != got.Results[i].Status {
				t.Fatalf("%s: %s vs %s", want.Results[i].CriterionID, got.Results[i].Status, want.Results[i].Status)
			}
		}
		if got.Results[0].Status == "" {
			t.Fatal("no results")
		}
	}
	// A later observation of the same call and arguments replaces the earlier.
	var agg Aggregate
	e1, _ := ValidateEvent([]byte(`{"event_id":"o1","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:00Z","observations":[{"call":"f","args":["a"],"value":1}]}`))
	e2, _ := ValidateEvent([]byte(`{"event_id":"o2","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:01Z","observations":[{"call":"f","args":["a"],"value":2}]}`))
	agg.Add(e1)
	agg.Add(e2)
	if len(agg.Observations) != 1 {
		t.Fatalf("observations %+v", agg.Observations)
	}
	if v, ok := agg.Env(nil).Observe("f", "a"); !ok || v != float64(2) {
		t.Fatalf("f(a) = %v %v", v, ok)
	}
}
