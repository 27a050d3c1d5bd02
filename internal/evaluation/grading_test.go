package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/expect"
	"github.com/agentclock/clockwork/internal/store"
	"github.com/agentclock/clockwork/internal/store/bolt"
)

// scriptedJudge hangs (until its call's context ends) while down is set,
// answers a score otherwise, and answers something that is not a grade for
// the criteria in refuse.
type scriptedJudge struct {
	down   atomic.Bool
	refuse map[string]bool
	calls  atomic.Int64
}

func (j *scriptedJudge) Judge(ctx context.Context, req anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	j.calls.Add(1)
	if j.refuse[req.CriterionID] {
		return nil, fmt.Errorf("judge answer rejected: %w: score is missing", anticipate.ErrNotAGrade)
	}
	if j.down.Load() {
		<-ctx.Done()
		return nil, fmt.Errorf("judge timed out: %w", ctx.Err())
	}
	return &anticipate.JudgeResponse{Score: 1, Rationale: "fine", GradedBy: "model:test"}, nil
}

// jobsQueue records what VERIFY and the repair enqueue.
type jobsQueue struct {
	mu   sync.Mutex
	jobs []GradeJob
}

func (q *jobsQueue) Enqueue(_ context.Context, jobs []GradeJob) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.jobs = append(q.jobs, jobs...)
	return nil
}

func (q *jobsQueue) take() []GradeJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.jobs
	q.jobs = nil
	return j
}

// testClock is a settable clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// heuristicPlan declares an ANTICIPATE with n HEURISTIC criteria (h-0 …)
// besides the seed's, runs its plan to PLAN_COMPLETE and returns the agent.
func heuristicPlan(t *testing.T, svc *Service, plan string, n int) string {
	t.Helper()
	raw, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["plan_id"] = plan
	m["grading_policy"].(map[string]any)["grader_type"] = "MODEL"
	m["grading_policy"].(map[string]any)["passing_threshold"] = 0.1
	ex := m["expectations"].(map[string]any)
	for i := range n {
		ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{"criterion_id": fmt.Sprintf("h-%d", i),
			"description": "criterion holds", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.1})
	}
	b, _ := json.Marshal(m)
	ant, err := anticipate.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	all := func(string) bool { return true }
	ctx := context.Background()
	if _, _, err := svc.Declare(ctx, ant, "test", all); err != nil {
		t.Fatal(err)
	}
	for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
		if _, err := svc.AppendEvent(ctx, plan, event(i, typ, nil), Caller{May: all}); err != nil {
			t.Fatal(err)
		}
	}
	agent, _ := m["agent_id"].(string)
	return agent
}

func gradingService(t *testing.T, j Judge, retry JudgeRetry) (*Service, *jobsQueue, *testClock) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "v.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := &testClock{t: time.Date(2026, 6, 24, 11, 0, 0, 0, time.UTC)}
	q := &jobsQueue{}
	return New(st, Options{Judge: j, JudgeRetry: retry, Grader: q, Now: clock.Now, EvaluationJudgeRate: 1e6}), q, clock
}

func onlyVerification(t *testing.T, svc *Service, agent string) anticipate.Verification {
	t.Helper()
	vs, err := svc.Verifications(context.Background(), "ant-20260624-001", agent, Caller{May: func(string) bool { return true }})
	if err != nil || len(vs) != 1 {
		t.Fatalf("verifications %v %v", vs, err)
	}
	return vs[0]
}

func heuristic(v anticipate.Verification) []anticipate.Result {
	var out []anticipate.Result
	for _, r := range v.Results {
		if strings.HasPrefix(r.CriterionID, "h-") {
			out = append(out, r)
		}
	}
	return out
}

// TestVerifyMakesNoJudgeCall: with a judge that hangs, a plan with ten
// HEURISTIC criteria gets its VERIFY at once, every HEURISTIC criterion
// PENDING and awaiting the judge, and one grading job each. Before, VERIFY
// called the judge inside the change's processing (on AWS the stream
// batch), so a hanging judge held it, and the record could be discarded.
func TestVerifyMakesNoJudgeCall(t *testing.T) {
	judge := &scriptedJudge{}
	judge.down.Store(true)
	svc, q, _ := gradingService(t, judge, JudgeRetry{})
	agent := heuristicPlan(t, svc, "plan-h", 10)
	if err := svc.Verify(context.Background(), agent, "plan-h"); err != nil {
		t.Fatalf("VERIFY: %v", err)
	}
	if judge.calls.Load() != 0 {
		t.Fatalf("VERIFY called the judge %d times", judge.calls.Load())
	}
	v := onlyVerification(t, svc, agent)
	for _, r := range heuristic(v) {
		if r.Status != anticipate.StatusPending || r.Evidence != "pending: awaiting the model judge" {
			t.Errorf("%s: %+v", r.CriterionID, r)
		}
	}
	if jobs := q.take(); len(jobs) != 10 {
		t.Fatalf("%d grading jobs, want 10", len(jobs))
	}
	// A replay of the record: no second VERIFY, the jobs enqueued again.
	if err := svc.Verify(context.Background(), agent, "plan-h"); err != nil {
		t.Fatal(err)
	}
	if jobs := q.take(); len(jobs) != 10 {
		t.Fatalf("a replay enqueued %d jobs, want the 10 still waiting", len(jobs))
	}
}

// TestGradingOutlivesAJudgeOutage: the judge hangs for its first three
// attempts at every criterion; each job then asks to come back after a
// wait below the time spent failing (at least Base, at most Max), and once
// the judge is back every criterion is graded, the VERIFY a new signed
// version and out of the grading index.
func TestGradingOutlivesAJudgeOutage(t *testing.T) {
	ctx := context.Background()
	judge := &scriptedJudge{}
	judge.down.Store(true)
	retry := JudgeRetry{Attempts: 8, Base: time.Minute, Max: 4 * time.Minute, CallTimeout: 20 * time.Millisecond}
	svc, q, clock := gradingService(t, judge, retry)
	agent := heuristicPlan(t, svc, "plan-o", 3)
	if err := svc.Verify(ctx, agent, "plan-o"); err != nil {
		t.Fatal(err)
	}
	before := onlyVerification(t, svc, agent)
	jobs := q.take()
	start := clock.Now()
	for round := range 3 {
		var next []GradeJob
		var wait time.Duration
		ceiling := min(max(clock.Now().Sub(start), retry.Base), retry.Max)
		for _, j := range jobs {
			at, err := svc.GradeCriterion(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			got := at.Sub(clock.Now())
			if got < retry.Base/10 || got > ceiling {
				t.Fatalf("round %d: %s comes back after %s, want within [%s, %s]", round, j.CriterionID, got, retry.Base/10, ceiling)
			}
			wait = max(wait, got)
			// Early, the job does nothing and names its time again.
			if again, err := svc.GradeCriterion(ctx, j); err != nil || !again.Equal(at) {
				t.Fatalf("an early job: %v %v", again, err)
			}
			next = append(next, GradeJob{VerificationID: j.VerificationID, CriterionID: j.CriterionID, At: at})
		}
		jobs = next
		clock.Add(wait)
	}
	if due, err := svc.ListGrading(ctx, clock.Now(), 100); err != nil || len(due) != 3 {
		t.Fatalf("grading index: %d due, %v; want 3", len(due), err)
	}
	judge.down.Store(false)
	for _, j := range jobs {
		if at, err := svc.GradeCriterion(ctx, j); err != nil || !at.IsZero() {
			t.Fatalf("grading after recovery: %v %v", at, err)
		}
	}
	v := onlyVerification(t, svc, agent)
	for _, r := range heuristic(v) {
		if r.Status == anticipate.StatusPending || r.GradedBy != "model:test" {
			t.Errorf("%s not graded: %+v", r.CriterionID, r)
		}
	}
	if v.DDNASignature == before.DDNASignature || v.Verdict == anticipate.VerdictPending {
		t.Fatalf("VERIFY not re-sealed with a verdict: %s %s", v.Verdict, v.DDNASignature)
	}
	if err := anticipate.CheckSeal(&v); err != nil {
		t.Fatalf("re-sealed VERIFY: %v", err)
	}
	if due, err := svc.ListGrading(ctx, clock.Now().Add(time.Hour), 100); err != nil || len(due) != 0 {
		t.Fatalf("still in the grading index: %v %v", due, err)
	}
	// A duplicate delivery of a job already done changes nothing.
	calls := judge.calls.Load()
	if _, err := svc.GradeCriterion(ctx, jobs[0]); err != nil || judge.calls.Load() != calls {
		t.Fatalf("a duplicate job called the judge (%v)", err)
	}
}

// TestGradingGivesUp: a judge that never answers leaves the criterion
// PENDING with the reason after the last attempt; an answer that cannot be
// a grade is not retried at all.
func TestGradingGivesUp(t *testing.T) {
	ctx := context.Background()
	judge := &scriptedJudge{refuse: map[string]bool{"h-1": true}}
	judge.down.Store(true)
	svc, q, clock := gradingService(t, judge, JudgeRetry{Attempts: 3, Base: time.Second, CallTimeout: 10 * time.Millisecond})
	agent := heuristicPlan(t, svc, "plan-g", 2)
	if err := svc.Verify(ctx, agent, "plan-g"); err != nil {
		t.Fatal(err)
	}
	jobs := q.take()
	for len(jobs) > 0 {
		var next []GradeJob
		for _, j := range jobs {
			at, err := svc.GradeCriterion(ctx, j)
			if err != nil {
				t.Fatal(err)
			}
			if !at.IsZero() {
				next = append(next, GradeJob{VerificationID: j.VerificationID, CriterionID: j.CriterionID, At: at})
			}
		}
		jobs = next
		clock.Add(time.Hour)
	}
	if judge.calls.Load() != 3+1 {
		t.Fatalf("%d judge calls, want 3 for h-0 and 1 for h-1", judge.calls.Load())
	}
	for _, r := range heuristic(onlyVerification(t, svc, agent)) {
		want := map[string]string{"h-0": "pending: the model judge failed 3 attempts; the last: judge timed out", "h-1": "pending: judge answer rejected"}[r.CriterionID]
		if r.Status != anticipate.StatusPending || !strings.HasPrefix(r.Evidence, want) {
			t.Errorf("%s: %+v, want evidence %q…", r.CriterionID, r, want)
		}
	}
}

// TestRepairGrading: jobs late by more than the repair's bound are
// enqueued again, once per bound.
func TestRepairGrading(t *testing.T) {
	ctx := context.Background()
	svc, q, clock := gradingService(t, &scriptedJudge{}, JudgeRetry{})
	agent := heuristicPlan(t, svc, "plan-r", 2)
	if err := svc.Verify(ctx, agent, "plan-r"); err != nil {
		t.Fatal(err)
	}
	q.take() // lost
	if n, err := svc.RepairGrading(ctx, q, 15*time.Minute, 100); err != nil || n != 0 {
		t.Fatalf("repair of jobs not yet late: %d %v", n, err)
	}
	clock.Add(16 * time.Minute)
	if n, err := svc.RepairGrading(ctx, q, 15*time.Minute, 100); err != nil || n != 2 || len(q.take()) != 2 {
		t.Fatalf("repair: %d %v", n, err)
	}
	if n, err := svc.RepairGrading(ctx, q, 15*time.Minute, 100); err != nil || n != 0 {
		t.Fatalf("a second repair at once re-enqueued %d (%v)", n, err)
	}
	agentV := onlyVerification(t, svc, agent)
	for _, j := range []string{"h-0", "h-1"} {
		if _, err := svc.GradeCriterion(ctx, GradeJob{VerificationID: agentV.VerificationID, CriterionID: j}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range heuristic(onlyVerification(t, svc, agent)) {
		if r.Status == anticipate.StatusPending {
			t.Errorf("%s still pending after the repaired jobs ran", r.CriterionID)
		}
	}
}

func TestAfterFailure(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := JudgeRetry{Attempts: 4, Base: 30 * time.Second, Max: 90 * time.Second}.withDefaults()
	transient := errors.New("judge unreachable")
	for _, c := range []struct {
		name     string
		attempts int
		since    time.Time // the first failure (zero: none yet)
		err      error
		// the next attempt's bounds after now (0, 0: none)
		from, to time.Duration
		reason   string
	}{
		{"first failure: below Base", 0, time.Time{}, transient, 3 * time.Second, 30 * time.Second, ""},
		{"below the time spent failing", 1, now.Add(-time.Minute), transient, 3 * time.Second, time.Minute, ""},
		{"capped at Max", 2, now.Add(-time.Hour), transient, 3 * time.Second, 90 * time.Second, ""},
		{"last attempt", 3, now.Add(-time.Hour), transient, 0, 0, "the model judge failed 4 attempts; the last: judge unreachable"},
		{"not a grade", 0, time.Time{}, fmt.Errorf("x: %w", anticipate.ErrNotAGrade), 0, 0, "x: the judge's answer is not a grade"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := JudgeAttempts{Attempts: c.attempts}
			if !c.since.IsZero() {
				st.FailingSince = expect.FormatTime(c.since)
			}
			next, reason := afterFailure("v/c", st, c.err, now, r)
			if reason != c.reason {
				t.Fatalf("reason %q, want %q", reason, c.reason)
			}
			if c.to == 0 {
				if next != nil {
					t.Fatalf("next %+v, want none", next)
				}
				return
			}
			at, err := expect.ParseTime(next.NextAt)
			if err != nil || at.Before(now.Add(c.from)) || at.After(now.Add(c.to)) {
				t.Fatalf("next %+v, want within [%s, %s]", next, c.from, c.to)
			}
			if next.Attempts != c.attempts+1 || next.LastError != "judge unreachable" || next.FailingSince == "" {
				t.Fatalf("next %+v", next)
			}
		})
	}
}

// answerJudge answers every criterion with the same rationale.
type answerJudge struct{ rationale string }

func (j answerJudge) Judge(context.Context, anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	return &anticipate.JudgeResponse{Score: 1, Rationale: j.rationale, GradedBy: "model:test"}, nil
}

// refusingStore refuses, as too large, every commit of an item holding
// marker: a VERIFY at the store's item limit.
type refusingStore struct {
	store.Store
	marker string
}

func (s refusingStore) Commit(ctx context.Context, ws []store.Write) error {
	for _, w := range ws {
		if w.Put != nil && strings.Contains(string(w.Put.Data), s.marker) {
			return fmt.Errorf("item of 409687 bytes: %w", store.ErrTooLarge)
		}
	}
	return s.Store.Commit(ctx, ws)
}

// TestGradeTooLargeForTheRecordEndsTheJob: a grade the VERIFY's record
// cannot take (at the store's item limit) leaves the criterion pending
// with the reason, and its job ends. Before, the job failed on every run
// and, on the embedded worker, its failing jobs could fill every page of
// the grading index and starve every other tenant's grading (a second
// tenant's review found it).
func TestGradeTooLargeForTheRecordEndsTheJob(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "v.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q := &jobsQueue{}
	svc := New(refusingStore{Store: st, marker: "HUGE-RATIONALE"}, Options{Judge: answerJudge{"HUGE-RATIONALE"}, Grader: q})
	agent := heuristicPlan(t, svc, "plan-big", 1)
	if err := svc.Verify(ctx, agent, "plan-big"); err != nil {
		t.Fatal(err)
	}
	for _, j := range q.take() {
		if at, err := svc.GradeCriterion(ctx, j); err != nil || !at.IsZero() {
			t.Fatalf("a grade too large for the record: %v %v, want the job done", at, err)
		}
	}
	for _, r := range heuristic(onlyVerification(t, svc, agent)) {
		if r.Status != anticipate.StatusPending || !strings.Contains(r.Evidence, "does not fit in the VERIFY") {
			t.Fatalf("%s: %+v", r.CriterionID, r)
		}
	}
	if due, err := svc.ListGrading(ctx, time.Now().Add(time.Hour), 10); err != nil || len(due) != 0 {
		t.Fatalf("still waiting: %v %v", due, err)
	}
}

// TestDuplicateDeliveriesCountOneAttempt: three deliveries of one job at
// once (a queue's redelivery, the sweep's copy) with a failing judge
// count one failed attempt, not three.
func TestDuplicateDeliveriesCountOneAttempt(t *testing.T) {
	ctx := context.Background()
	judge := &scriptedJudge{}
	judge.down.Store(true)
	svc, q, _ := gradingService(t, judge, JudgeRetry{Attempts: 3, Base: time.Minute, CallTimeout: 50 * time.Millisecond})
	agent := heuristicPlan(t, svc, "plan-dup", 1)
	if err := svc.Verify(ctx, agent, "plan-dup"); err != nil {
		t.Fatal(err)
	}
	job := q.take()[0]
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := svc.GradeCriterion(ctx, job); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	vr, err := svc.readVerification(ctx, onlyVerification(t, svc, agent).VerificationID)
	if err != nil {
		t.Fatal(err)
	}
	if a := vr.Judging["h-0"]; a == nil || a.Attempts != 1 {
		t.Fatalf("after three deliveries of one attempt: %+v, want one failed attempt counted", a)
	}
}

// TestDuplicateDeliveriesCallTheJudgeOnce: deliveries of one job at once
// make one judge call between them (the attempt is claimed first), where
// each used to make its own; a delivery while the claim is held does
// nothing and carries nothing on (zero retry time), and once the claim has
// expired (its holder died) the attempt is open again.
func TestDuplicateDeliveriesCallTheJudgeOnce(t *testing.T) {
	ctx := context.Background()
	judge := &scriptedJudge{}
	svc, q, _ := gradingService(t, judge, JudgeRetry{Attempts: 3, Base: time.Minute, CallTimeout: 50 * time.Millisecond})
	agent := heuristicPlan(t, svc, "plan-once", 1)
	if err := svc.Verify(ctx, agent, "plan-once"); err != nil {
		t.Fatal(err)
	}
	job := q.take()[0]
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if at, err := svc.GradeCriterion(ctx, job); err != nil || !at.IsZero() {
				t.Errorf("GradeCriterion: retry at %v, %v; want none", at, err)
			}
		}()
	}
	wg.Wait()
	if n := judge.calls.Load(); n != 1 {
		t.Fatalf("four deliveries at once made %d judge calls, want 1", n)
	}
	if h := heuristic(onlyVerification(t, svc, agent)); len(h) != 1 || h[0].Status != anticipate.StatusPass {
		t.Fatalf("criterion %+v, want graded", h)
	}

	// A claim held by a run that died: a delivery meanwhile drops out; once
	// the claim has expired, a delivery grades.
	judge = &scriptedJudge{}
	svc, q, _ = gradingService(t, judge, JudgeRetry{Attempts: 3, Base: time.Minute, CallTimeout: 50 * time.Millisecond})
	agent = heuristicPlan(t, svc, "plan-died", 1)
	if err := svc.Verify(ctx, agent, "plan-died"); err != nil {
		t.Fatal(err)
	}
	job = q.take()[0]
	if held, err := store.Claim(ctx, svc.store, gradingClaimKey(job, 0), time.Minute); err != nil || !held {
		t.Fatalf("claim: %v %v", held, err)
	}
	if at, err := svc.GradeCriterion(ctx, job); err != nil || !at.IsZero() || judge.calls.Load() != 0 {
		t.Fatalf("a delivery while claimed: retry at %v, %v, %d calls; want nothing done", at, err, judge.calls.Load())
	}
	expired := store.Item{Key: gradingClaimKey(job, 0), Type: store.TypeClaim, Data: []byte(`{}`), ExpiresAt: time.Now().Add(-time.Second).Unix()}
	if err := svc.store.Commit(ctx, []store.Write{{Put: &expired}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.GradeCriterion(ctx, job); err != nil || judge.calls.Load() != 1 {
		t.Fatalf("after the claim expired: %v, %d calls; want one", err, judge.calls.Load())
	}
}

// heldJudge answers once released, and counts its calls.
type heldJudge struct {
	calls   atomic.Int64
	called  chan struct{}
	release chan struct{}
}

func (j *heldJudge) Judge(ctx context.Context, _ anticipate.JudgeRequest) (*anticipate.JudgeResponse, error) {
	if j.calls.Add(1) == 1 {
		close(j.called)
	}
	<-j.release
	return &anticipate.JudgeResponse{Score: 1, Rationale: "fine", GradedBy: "model:test"}, nil
}

// TestRepairKeepsAGradeInFlight: the sweep's repair of a job that waits
// while its judge call is under way (a slow judge past the repair bound)
// neither discards the answer when it comes nor calls the judge again for
// the same attempt (before, the repair's move of the next attempt made the
// answer look stale, and the re-enqueued job called the judge anew).
func TestRepairKeepsAGradeInFlight(t *testing.T) {
	ctx := context.Background()
	judge := &heldJudge{called: make(chan struct{}), release: make(chan struct{})}
	svc, q, clock := gradingService(t, judge, JudgeRetry{CallTimeout: time.Minute})
	agent := heuristicPlan(t, svc, "plan-r", 1)
	if err := svc.Verify(ctx, agent, "plan-r"); err != nil {
		t.Fatal(err)
	}
	jobs := q.take()
	if len(jobs) != 1 {
		t.Fatalf("%d jobs", len(jobs))
	}
	done := make(chan error)
	go func() {
		_, err := svc.GradeCriterion(ctx, jobs[0])
		done <- err
	}()
	<-judge.called
	clock.Add(20 * time.Minute)
	if n, err := svc.RepairGrading(ctx, q, 15*time.Minute, 100); err != nil || n != 1 {
		t.Fatalf("repair: %d, %v", n, err)
	}
	for _, j := range q.take() {
		if at, err := svc.GradeCriterion(ctx, j); err != nil || !at.IsZero() {
			t.Fatalf("the repaired job while the attempt is under way: %v, %v", at, err)
		}
	}
	close(judge.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := judge.calls.Load(); n != 1 {
		t.Fatalf("%d judge calls for one attempt", n)
	}
	for _, r := range heuristic(onlyVerification(t, svc, agent)) {
		if r.Status == anticipate.StatusPending || r.GradedBy != "model:test" {
			t.Fatalf("the answer in flight was not recorded: %+v", r)
		}
	}
}
