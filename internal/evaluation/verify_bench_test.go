package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// anticipation50 returns a signed ANTICIPATE with 50 DETERMINISTIC
// criteria of the seed's shapes.
func anticipation50(tb testing.TB, plan string) []byte {
	tb.Helper()
	raw, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(raw, &m)
	m["plan_id"] = plan
	shapes := []string{
		"step_count <= 20000",
		"escalation_count == 0",
		"tool_invoked('iam_remove_user') == false",
		"user_exists(target_username) AND group_member(target_username, 'engineering')",
		"policy_count(target_username) <= group_policy_count('engineering')",
	}
	var oc, tc, ac []any
	for i := 0; i < 50; i++ {
		c := map[string]any{"criterion_id": fmt.Sprintf("c-%02d", i), "description": "criterion", "measurement": "DETERMINISTIC",
			"assertion": shapes[i%len(shapes)], "weight": 0.5}
		switch i % 3 {
		case 0:
			oc = append(oc, c)
		case 1:
			tc = append(tc, c)
		default:
			ac = append(ac, c)
		}
	}
	m["expectations"] = map[string]any{"outcome_criteria": oc, "trajectory_criteria": tc, "anti_criteria": ac}
	b, _ := json.Marshal(m)
	out, err := anticipate.Sign(b)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func event(id int, typ string, fields map[string]any) []byte {
	m := map[string]any{"event_id": fmt.Sprintf("ev-%06d", id), "message_type": typ,
		"timestamp": time.Date(2026, 6, 24, 10, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Millisecond).Format(time.RFC3339Nano)}
	for k, v := range fields {
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return b
}

// BenchmarkVerify50x10k measures one VERIFY, end to end through the
// service (load the 10,000 stored events, validate them, grade 50
// criteria, sign, store), on the embedded store with durable commits.
func BenchmarkVerify50x10k(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "bench.db")
	// Set up without fsync, then measure with durable commits.
	st, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	svc := New(st, Options{})
	all := func(string) bool { return true }
	const plans = 1
	for p := 0; p < plans; p++ {
		plan := fmt.Sprintf("plan-%d", p)
		ant := anticipation50(b, plan)
		var m map[string]any
		json.Unmarshal(ant, &m)
		m["anticipation_id"] = "ant-" + plan
		raw, _ := json.Marshal(m)
		ant, _ = anticipate.Sign(raw)
		if _, _, err := svc.Declare(ctx, ant, "bench", all); err != nil {
			b.Fatal(err)
		}
		if err := appendExecution(ctx, svc, st, plan, 10000); err != nil {
			b.Fatal(err)
		}
	}
	st.Close()
	if st, err = bolt.Open(path, bolt.Options{}); err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc = New(st, Options{})
	ex, err := svc.ExecutionFor(ctx, "plan-0", "", Caller{May: all})
	if err != nil || ex.Count != 10000 || !ex.Completed {
		b.Fatalf("setup: %+v %v", ex, err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plan := fmt.Sprintf("plan-%d", i%plans)
		b.StopTimer()
		ex, err := svc.ExecutionFor(ctx, plan, "", Caller{May: all})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if i >= plans {
			// Later rounds re-grade: delete the stored VERIFY first.
			b.StopTimer()
			rec, _ := svc.Anticipation(ctx, ex.Bound[0], ex.Owner(), Caller{May: all})
			st.Commit(ctx, []store.Write{{Delete: ptr(verificationKey(anticipate.VerificationIDFor(rec.Digest, plan)))}})
			b.StartTimer()
		}
		if err := svc.Verify(ctx, ex.Owner(), plan); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/verify")
}

func ptr[T any](v T) *T { return &v }

// appendExecution stores n events for plan, in batches written straight
// to the store (the benchmark measures VERIFY, not ingestion).
func appendExecution(ctx context.Context, svc *Service, st store.Store, plan string, n int) error {
	if _, err := svc.AppendEvent(ctx, plan, event(0, "TOOL_REQUEST", map[string]any{"tool": "iam_create_user", "arguments": map[string]any{}}), Caller{May: func(string) bool { return true }}); err != nil {
		return err
	}
	tools := []string{"iam_create_user", "iam_add_user_to_group", "iam_attach_policy"}
	for i := 1; i < n-2; i++ {
		var raw []byte
		switch i % 3 {
		case 0:
			raw = event(i, "TOOL_REQUEST", map[string]any{"tool": tools[i%3], "arguments": map[string]any{"user": "alice"}})
		case 1:
			raw = event(i, "TOOL_RESULT", map[string]any{"tool": tools[i%3], "status": "SUCCESS"})
		default:
			raw = event(i, "STEP_COMPLETE", nil)
		}
		if _, err := svc.AppendEvent(ctx, plan, raw, Caller{May: func(string) bool { return true }}); err != nil {
			return err
		}
	}
	obs := []map[string]any{
		{"call": "user_exists", "args": []any{"alice"}, "value": true},
		{"call": "group_member", "args": []any{"alice", "engineering"}, "value": true},
		{"call": "policy_count", "args": []any{"alice"}, "value": 2},
		{"call": "group_policy_count", "args": []any{"engineering"}, "value": 3},
	}
	if _, err := svc.AppendEvent(ctx, plan, event(n-2, "OUTCOME", map[string]any{"variables": map[string]any{"target_username": "alice"}, "observations": obs}), Caller{May: func(string) bool { return true }}); err != nil {
		return err
	}
	_, err := svc.AppendEvent(ctx, plan, event(n-1, "PLAN_COMPLETE", nil), Caller{May: func(string) bool { return true }})
	return err
}
