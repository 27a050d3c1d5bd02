package anticipate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/agentclock/clockwork/internal/assertion"
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

// TestSpilledAggregateFoldsToTheSame: a long plan's aggregate spilled into
// chunks as it grows (each chunk and, every 50 events, the aggregate
// through a JSON round trip, as the store keeps them) folds back, with WithChunks, to what one
// aggregate of every event gives: the same tool counts, variables (later
// wins) and observations (a later one of a call and its arguments
// replaces the earlier, wherever it was spilled); and the aggregate itself
// never holds much more than ChunkBytes of them.
func TestSpilledAggregateFoldsToTheSame(t *testing.T) {
	var whole, spilled Aggregate
	var chunks []Chunk
	largest, largestChunk := 0, 0
	pad := strings.Repeat("x", 400)
	for i := range 10000 {
		var raw string
		switch i % 4 {
		case 0:
			raw = fmt.Sprintf(`{"event_id":"e%d","message_type":"TOOL_REQUEST","timestamp":"2026-06-24T10:00:00Z","tool":"tool-%d","arguments":{}}`, i, i%37)
		case 1:
			raw = fmt.Sprintf(`{"event_id":"e%d","message_type":"OUTCOME","timestamp":"2026-06-24T10:00:01Z","variables":{"v%d":"%s","last":%d},"observations":[{"call":"f","args":["k%d"],"value":"%d%s"}]}`, i, i%500, pad, i, i%2000, i, pad)
		default:
			raw = fmt.Sprintf(`{"event_id":"e%d","message_type":"STEP_COMPLETE","timestamp":"2026-06-24T10:00:02Z"}`, i)
		}
		e, err := ValidateEvent([]byte(raw))
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		whole.Add(e)
		spilled.Add(e)
		if c, ok := spilled.Spill(); ok {
			b, _ := json.Marshal(c)
			var back Chunk
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			chunks = append(chunks, back)
			largestChunk = max(largestChunk, len(b))
		}
		if i%50 == 0 {
			b, _ := json.Marshal(spilled)
			largest = max(largest, len(b))
			spilled = Aggregate{}
			if err := json.Unmarshal(b, &spilled); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(chunks) < 10 || spilled.Chunks != len(chunks) {
		t.Fatalf("%d chunks spilled, the aggregate counts %d", len(chunks), spilled.Chunks)
	}
	if largestChunk > 2*ChunkBytes || largest > 2*ChunkBytes+assertion.MaxToolArgsBytes {
		t.Fatalf("a chunk of %d bytes, an aggregate of %d; want about %d of growing part at most", largestChunk, largest, ChunkBytes)
	}
	full := spilled.WithChunks(chunks)
	if !reflect.DeepEqual(whole.ToolCounts, full.ToolCounts) || !reflect.DeepEqual(whole.Variables, full.Variables) || len(whole.Observations) != len(full.Observations) {
		t.Fatalf("folded back: %d tools, %d variables, %d observations; want %d, %d, %d",
			len(full.ToolCounts), len(full.Variables), len(full.Observations), len(whole.ToolCounts), len(whole.Variables), len(whole.Observations))
	}
	for i := range whole.Observations {
		if !reflect.DeepEqual(whole.Observations[i], full.Observations[i]) {
			t.Fatalf("observation %d: %+v, want %+v", i, full.Observations[i], whole.Observations[i])
		}
	}
	if !reflect.DeepEqual(whole.Trajectory(), full.Trajectory()) {
		t.Fatal("the trajectories differ")
	}
	t.Logf("10,000 events: %d chunks, the largest %d bytes, the largest aggregate %d (one aggregate of all: %d)", len(chunks), largestChunk, largest, len(mustJSON(whole)))
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }
