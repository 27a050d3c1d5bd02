package anticipate

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/errs"
)

// Fuzz targets beside FuzzValidate, FuzzValidateEvent, FuzzStripTopLevel
// and FuzzJudgeResponse (in the other test files). Seed corpora are under
// testdata/fuzz/<FuzzName>/.

// FuzzCanonical: Canonical never panics; its output is a fixed point (the
// canonical form of a canonical form is itself) and means the same JSON
// value as the input; the digest is defined exactly when the canonical form
// is.
func FuzzCanonical(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		c1, err := Canonical(raw)
		if err != nil {
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("error code %s", errs.CodeOf(err))
			}
			return
		}
		c2, err := Canonical(c1)
		if err != nil || string(c1) != string(c2) {
			t.Fatalf("not a fixed point: %q -> %q (%v)", c1, c2, err)
		}
		var a, b any
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatalf("Canonical accepted what encoding/json refuses: %v", err)
		}
		if err := json.Unmarshal(c1, &b); err != nil {
			t.Fatalf("canonical form %q is not JSON: %v", c1, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("canonical form %q means something else than %q", c1, raw)
		}
		if c1[0] == '{' {
			if _, err := Digest(raw); err != nil {
				t.Fatalf("Digest of a canonicalizable object: %v", err)
			}
		}
	})
}

// gradeAnticipation is the seed's ANTICIPATE under a COMPOSITE policy with
// a HUMAN criterion added, so that grades can be applied.
func gradeAnticipation(tb testing.TB) *Anticipation {
	m := seedMap(tb)
	policy(m)["grader_type"] = "COMPOSITE"
	m["expectations"].(map[string]any)["outcome_criteria"] = append(criteria(m, "outcome_criteria"), map[string]any{
		"criterion_id": "hc-1", "description": "A reviewer approves", "measurement": "HUMAN",
		"assertion": "The change is what was asked for", "weight": 0.7,
	})
	return mustValidate(tb, signed(tb, m))
}

// FuzzGrade grades a fuzzed execution (a JSON array of events) against a
// fixed anticipation, from the events (BuildEnv) and from the stored
// aggregate (Aggregate.Env), then applies a fuzzed grade: nothing panics,
// both environments grade alike, scores stay in [0, 1], the verdict is
// consistent with the results and every VERIFY is sealed.
func FuzzGrade(f *testing.F) {
	a := gradeAnticipation(f)
	now := time.Date(2026, 6, 24, 11, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw []byte, score float64) {
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) > 64 {
			return
		}
		var events []*Event
		var agg Aggregate
		seen := map[string]bool{}
		for _, r := range list {
			e, err := ValidateEvent(r)
			if err != nil {
				continue
			}
			if !seen[e.EventID] {
				seen[e.EventID] = true
				agg.Add(e)
			}
			events = append(events, e)
		}
		exec := Execution{PlanID: "plan-abc123", ExecutionDigest: GenesisDigest}
		v := Grade(a, a.Programs(), BuildEnv(events, nil), nil, exec, now)
		w := Grade(a, a.Programs(), agg.Env(nil), nil, exec, now)
		if !reflect.DeepEqual(v, w) {
			t.Fatalf("grading from the events and from the aggregate differ:\n%s\n%s", dump(v), dump(w))
		}
		checkVerify(t, a, v)
		g, err := ApplyGrade(v, a.GradingPolicy, "hc-1", score, "r", "human:fuzz", now)
		if err != nil {
			c := errs.CodeOf(err)
			if c != errs.Invalid && c != errs.Conflict {
				t.Fatalf("ApplyGrade: code %s: %v", c, err)
			}
			if score >= 0 && score <= 1 && c != errs.Conflict {
				t.Fatalf("ApplyGrade refused score %v: %v", score, err)
			}
			return
		}
		if math.IsNaN(score) || score < 0 || score > 1 {
			t.Fatalf("ApplyGrade accepted score %v", score)
		}
		checkVerify(t, a, g)
		if g.Verdict == VerdictPending {
			t.Fatalf("still PENDING after the only pending criterion was graded:\n%s", dump(g))
		}
		if _, err := ApplyGrade(g, a.GradingPolicy, "hc-1", score, "r", "human:fuzz", now); !errs.Is(err, errs.Conflict) {
			t.Fatalf("second grade: %v", err)
		}
	})
}

func checkVerify(t *testing.T, a *Anticipation, v Verification) {
	t.Helper()
	if len(v.Results) != len(a.Criteria()) {
		t.Fatalf("%d results for %d criteria", len(v.Results), len(a.Criteria()))
	}
	if math.IsNaN(v.Score) || v.Score < 0 || v.Score > 1 {
		t.Fatalf("score %v", v.Score)
	}
	pending := false
	for _, r := range v.Results {
		if r.Score != nil && (math.IsNaN(*r.Score) || *r.Score < 0 || *r.Score > 1) {
			t.Fatalf("%s: score %v", r.CriterionID, *r.Score)
		}
		if (r.Status == StatusPending) != (r.Score == nil) {
			t.Fatalf("%s: status %s with score %v", r.CriterionID, r.Status, r.Score)
		}
		pending = pending || r.Status == StatusPending
	}
	switch v.Verdict {
	case VerdictPass:
		if pending || v.Score < v.PassingThreshold {
			t.Fatalf("PASS with pending=%v score %v", pending, v.Score)
		}
	case VerdictPending:
		if !pending {
			t.Fatalf("PENDING with nothing pending")
		}
	case VerdictFail:
	default:
		t.Fatalf("verdict %q", v.Verdict)
	}
	if err := CheckSeal(&v); err != nil {
		t.Fatalf("seal: %v", err)
	}
}
