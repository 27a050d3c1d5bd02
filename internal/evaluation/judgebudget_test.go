package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// hangingJudge answers the criteria named in quick at once and holds every
// other call until its context ends, as a judge whose model hangs does.
type hangingJudge struct {
	quick   map[string]bool
	calls   atomic.Int64
	running atomic.Int64
	maxRun  atomic.Int64
}

func (j *hangingJudge) Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	j.calls.Add(1)
	if n := j.running.Add(1); n > j.maxRun.Load() {
		j.maxRun.Store(n)
	}
	defer j.running.Add(-1)
	if j.quick[req.CriterionID] {
		return &anticipate.JudgeResponse{Score: 1, Rationale: "fine", GradedBy: "model:test"}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestVerifyWithAHangingJudge: a plan with ten HEURISTIC criteria whose
// judge hangs on eight of them still gets its VERIFY, within the judge
// budget: the two answered criteria graded, the eight others PENDING with
// the reason, the judge called at most judgeParallel at once. Before, the
// judge was called one criterion after another with no bound, so the
// VERIFY (and, on AWS, the stream batch) waited for every hung call.
func TestVerifyWithAHangingJudge(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "v.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	judge := &hangingJudge{quick: map[string]bool{"h-0": true, "h-1": true}}
	svc := New(st, Options{Judge: judge, JudgeBudget: 300 * time.Millisecond})

	raw, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["plan_id"] = "plan-h"
	m["grading_policy"].(map[string]any)["grader_type"] = "MODEL"
	m["grading_policy"].(map[string]any)["passing_threshold"] = 0.1 // reachable whatever the seed's own criteria score
	ex := m["expectations"].(map[string]any)
	for i := range 10 {
		ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{"criterion_id": fmt.Sprintf("h-%d", i),
			"description": "criterion holds", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.1})
	}
	b, _ := json.Marshal(m)
	ant, err := anticipate.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	all := func(string) bool { return true }
	if _, _, err := svc.Declare(ctx, ant, "test", all); err != nil {
		t.Fatal(err)
	}
	for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
		if _, err := svc.AppendEvent(ctx, "plan-h", event(i, typ, nil), Caller{May: all}); err != nil {
			t.Fatal(err)
		}
	}
	agent, _ := m["agent_id"].(string)
	if err := svc.Verify(ctx, agent, "plan-h"); err != nil {
		t.Fatalf("VERIFY with a hanging judge: %v", err)
	}
	vs, err := svc.Verifications(ctx, "ant-20260624-001", agent, Caller{May: all})
	if err != nil || len(vs) != 1 {
		t.Fatalf("verifications %v %v", vs, err)
	}
	graded, pending := 0, 0
	for _, r := range vs[0].Results {
		if !strings.HasPrefix(r.CriterionID, "h-") {
			continue
		}
		switch {
		case r.Status == anticipate.StatusPending && strings.Contains(r.Evidence, "did not answer within 100ms (its share of the 300ms budget)"):
			pending++
		case r.Status != anticipate.StatusPending && r.GradedBy == "model:test":
			graded++
		default:
			t.Errorf("%s: %+v", r.CriterionID, r)
		}
	}
	if graded != 2 || pending != 8 {
		t.Fatalf("%d graded, %d pending; want 2 and 8", graded, pending)
	}
	if judge.maxRun.Load() > judgeParallel {
		t.Fatalf("%d judge calls at once, want at most %d", judge.maxRun.Load(), judgeParallel)
	}
	if judge.running.Load() != 0 {
		t.Fatal("judge calls still running after the VERIFY")
	}
}
