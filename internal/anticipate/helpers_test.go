package anticipate

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/assertion"
	"github.com/agentclock/clockwork/internal/errs"
)

// seedRaw returns the seed's example exactly as in the seed, with its
// "sha256:..." placeholder replaced by the correct signature (the rest of
// the bytes, white space included, are untouched).
func seedRaw(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := Digest(raw)
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Replace(raw, []byte(`"sha256:..."`), []byte(`"`+d+`"`), 1)
	if bytes.Equal(out, raw) {
		t.Fatal("placeholder not found")
	}
	return out
}

// seedMap returns the seed example as a generic map to mutate.
func seedMap(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(seedRaw(t), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// signed encodes m and signs it.
func signed(t testing.TB, m map[string]any) []byte {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Sign(raw)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func criteria(m map[string]any, cat string) []any {
	return m["expectations"].(map[string]any)[cat].([]any)
}

func crit(m map[string]any, cat string, i int) map[string]any {
	return criteria(m, cat)[i].(map[string]any)
}

func policy(m map[string]any) map[string]any {
	return m["grading_policy"].(map[string]any)
}

// mustValidate validates raw and fails the test on error.
func mustValidate(t testing.TB, raw []byte) *Anticipation {
	t.Helper()
	a, err := Validate(raw)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return a
}

// fieldPaths returns the paths of an *errs.Error.
func fieldPaths(err error) []string {
	var e *errs.Error
	if !errors.As(err, &e) {
		return nil
	}
	var out []string
	for _, f := range e.Fields {
		out = append(out, f.Path)
	}
	return out
}

func fieldMessage(err error, path string) string {
	var e *errs.Error
	if !errors.As(err, &e) {
		return ""
	}
	for _, f := range e.Fields {
		if f.Path == path {
			return f.Message
		}
	}
	return ""
}

var t0 = time.Date(2026, 6, 24, 10, 0, 0, 0, time.UTC)

// seedEvents returns the events of an execution of the seed's plan with the
// given number of steps; removed adds an iam_remove_user request; obs are
// the OUTCOME observations (nil means all true).
func seedEvents(t testing.TB, steps int, removed bool, obs []map[string]any) [][]byte {
	t.Helper()
	if obs == nil {
		obs = []map[string]any{
			{"call": "user_exists", "args": []any{"alice"}, "value": true},
			{"call": "group_member", "args": []any{"alice", "engineering"}, "value": true},
			{"call": "policy_count", "args": []any{"alice"}, "value": 2},
			{"call": "group_policy_count", "args": []any{"engineering"}, "value": 3},
		}
	}
	var out [][]byte
	n := 0
	add := func(m map[string]any) {
		n++
		m["event_id"] = "ev-" + string(rune('a'+n))
		m["plan_id"] = "plan-abc123"
		m["timestamp"] = t0.Add(time.Duration(n) * time.Second).Format(time.RFC3339)
		raw, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	tools := []string{"iam_create_user", "iam_add_user_to_group", "iam_attach_policy", "iam_tag_user"}
	for i := 0; i < steps; i++ {
		tool := tools[i%len(tools)]
		add(map[string]any{"message_type": "TOOL_REQUEST", "tool": tool, "arguments": map[string]any{"user": "alice"}})
		add(map[string]any{"message_type": "TOOL_RESULT", "tool": tool, "status": "SUCCESS"})
		add(map[string]any{"message_type": "STEP_COMPLETE"})
	}
	if removed {
		add(map[string]any{"message_type": "TOOL_REQUEST", "tool": "iam_remove_user"})
		add(map[string]any{"message_type": "TOOL_RESULT", "tool": "iam_remove_user", "status": "SUCCESS"})
	}
	add(map[string]any{"message_type": "OUTCOME", "variables": map[string]any{"target_username": "alice"}, "observations": obs})
	add(map[string]any{"message_type": "PLAN_COMPLETE"})
	return out
}

// envOf validates events and builds their Env.
func envOf(t testing.TB, raws [][]byte, w assertion.Watcher) *assertion.Env {
	t.Helper()
	var evs []*Event
	for _, r := range raws {
		e, err := ValidateEvent(r)
		if err != nil {
			t.Fatalf("ValidateEvent(%s): %v", r, err)
		}
		evs = append(evs, e)
	}
	return BuildEnv(evs, w)
}

func chainHead(raws [][]byte) string {
	prev := GenesisDigest
	for _, r := range raws {
		prev = ChainDigest(prev, r)
	}
	return prev
}

func resultOf(v Verification, id string) Result {
	for _, r := range v.Results {
		if r.CriterionID == id {
			return r
		}
	}
	return Result{}
}

func readFile(p string) ([]byte, error) { return os.ReadFile(p) }
