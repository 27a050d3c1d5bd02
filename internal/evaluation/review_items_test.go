package evaluation

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/errs"
	"github.com/agentclock/clockwork/internal/review"
)

// recordingClock records the due times the service asks the watcher to
// keep; noCard makes it answer as for an agent without a card.
type recordingClock struct {
	mu        sync.Mutex
	raised    map[string]time.Time
	satisfied map[string]time.Time
	noCard    bool
	fail      bool
	refuse    bool
}

func (c *recordingClock) RaiseReviewDue(_ context.Context, agentID, itemID, queueID, planID string, dueAt time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.fail:
		return errs.E(errs.Unavailable, "watcher down")
	case c.noCard:
		return errs.E(errs.NotFound, "no card")
	case c.refuse:
		return errs.Fields("invalid raise request", []errs.FieldError{{Path: "skill", Message: "kind review-due may only be raised by tasks of skills [fulfil]"}})
	}
	c.raised[itemID] = dueAt
	return nil
}

func (c *recordingClock) SatisfyReviewDue(_ context.Context, agentID, itemID string, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fail {
		return errs.E(errs.Unavailable, "watcher down")
	}
	c.satisfied[itemID] = at
	return nil
}

// reviewedPlan declares (as principal "dave") an ANTICIPATE whose
// criteria are the given ones under a COMPOSITE policy, runs its plan to
// PLAN_COMPLETE and VERIFYs it; it returns the VERIFY's id.
func reviewedPlan(t *testing.T, svc *Service, plan string, criteria ...map[string]any) string {
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
	m["anticipation_id"] = "ant-" + plan
	m["grading_policy"] = map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.5, "weighted_scoring": false, "fail_on_any_anti_criteria": false}
	list := make([]any, len(criteria))
	for i, c := range criteria {
		list[i] = c
	}
	m["expectations"] = map[string]any{"outcome_criteria": list}
	b, _ := json.Marshal(m)
	ant, err := anticipate.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	all := func(string) bool { return true }
	ctx := context.Background()
	if _, _, err := svc.Declare(ctx, ant, "dave", all); err != nil {
		t.Fatal(err)
	}
	for i, typ := range []string{"STEP_COMPLETE", "PLAN_COMPLETE"} {
		if _, err := svc.AppendEvent(ctx, plan, event(i, typ, nil), Caller{May: all}); err != nil {
			t.Fatal(err)
		}
	}
	agent := m["agent_id"].(string)
	if err := svc.Verify(ctx, agent, plan); err != nil {
		t.Fatal(err)
	}
	vs, err := svc.Verifications(ctx, "ant-"+plan, agent, Caller{May: all})
	if err != nil || len(vs) != 1 {
		t.Fatalf("verifications %v %v", vs, err)
	}
	return vs[0].VerificationID
}

func human(id, queue string) map[string]any {
	c := map[string]any{"criterion_id": id, "description": "a person says it holds", "measurement": "HUMAN", "assertion": "The answer is polite", "weight": 1}
	if queue != "" {
		c["queue"] = queue
	}
	return c
}

func reviewer(name string) Reviewer {
	return Reviewer{Principal: name, Agents: []string{"*"}, May: func(string) bool { return true }}
}

func resultOf(v anticipate.Verification, id string) anticipate.Result {
	for _, r := range v.Results {
		if r.CriterionID == id {
			return r
		}
	}
	return anticipate.Result{}
}

// TestReviewQueueGradesVerify: a plan's queued HUMAN criteria become one
// item, opened with the VERIFY and assigned round-robin past the
// declarer; its due time is raised; a direct grade is refused; blind
// reviews; the last review grades the VERIFY by the queue's rule and
// satisfies the due time.
func TestReviewQueueGradesVerify(t *testing.T) {
	svc, _, clock := gradingService(t, nil, JudgeRetry{})
	rc := &recordingClock{raised: map[string]time.Time{}, satisfied: map[string]time.Time{}}
	svc.reviewClock = rc
	ctx := context.Background()
	q, created, err := svc.PutReviewQueue(ctx, []string{"*"}, "q1", []byte(`{"reviewers":["dave","alice","bob","carol"],"reviewsPerItem":2,"due":"PT4H"}`))
	if err != nil || !created || q.Resolve != review.Majority {
		t.Fatalf("put queue: %+v %v %v", q, created, err)
	}
	vid := reviewedPlan(t, svc, "plan-r1", human("hq-1", "q1"), human("hq-2", "q1"), human("hq-free", ""))
	v, _ := svc.Verification(ctx, vid, func(string) bool { return true })
	if v.Verification.Verdict != anticipate.VerdictPending || !strings.Contains(resultOf(v.Verification, "hq-1").Evidence, "awaiting 2 review(s) in queue q1") {
		t.Fatalf("VERIFY %s, hq-1 evidence %q", v.Verification.Verdict, resultOf(v.Verification, "hq-1").Evidence)
	}
	itemID := review.ItemID(vid, "q1", review.Grading, "")
	page, err := svc.ReviewItems(ctx, reviewer("alice"), "q1", "", "alice", 0, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].ItemID != itemID {
		t.Fatalf("alice's inbox %+v %v", page, err)
	}
	it := page.Items[0]
	// dave declared the criteria: the round-robin skips him.
	if strings.Join(it.Assignees, ",") != "alice,bob" || len(it.Criteria) != 2 || it.DueAt != "2026-06-24T15:00:00Z" {
		t.Fatalf("item %+v", it)
	}
	if due, ok := rc.raised[itemID]; !ok || !due.Equal(time.Date(2026, 6, 24, 15, 0, 0, 0, time.UTC)) {
		t.Fatalf("due time raised %v", rc.raised)
	}
	if it.DueExpectationID != "review:"+itemID {
		t.Fatalf("due expectation %q", it.DueExpectationID)
	}
	if page, _ := svc.ReviewItems(ctx, reviewer("carol"), "q1", "open", "carol", 0, ""); len(page.Items) != 0 {
		t.Fatalf("carol's inbox holds %d items", len(page.Items))
	}
	if _, err := svc.SubmitGrade(ctx, vid, "hq-1", 1, "", "human:eve", func(string) bool { return true }); !errs.Is(err, errs.Conflict) {
		t.Fatalf("direct grade of a queued criterion: %v", err)
	}
	if _, err := svc.SubmitGrade(ctx, vid, "hq-free", 1, "", "human:eve", func(string) bool { return true }); err != nil {
		t.Fatalf("direct grade of an unqueued criterion: %v", err)
	}
	post := func(who, crit, grade string) (ReviewItemView, error) {
		return svc.SubmitReview(ctx, reviewer(who), "q1", itemID, []byte(`{"criterionId":"`+crit+`","grade":`+grade+`,"comment":"by `+who+`"}`))
	}
	if _, err := post("carol", "hq-1", `"PASS"`); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a review by a non-assignee: %v", err)
	}
	clock.Add(time.Hour)
	for _, r := range [][3]string{{"alice", "hq-1", `"PASS"`}, {"alice", "hq-2", `"PASS"`}, {"bob", "hq-1", `"FAIL"`}} {
		view, err := post(r[0], r[1], r[2])
		if err != nil {
			t.Fatal(err)
		}
		for _, rv := range view.Reviews {
			if rv.Reviewer != r[0] {
				t.Fatalf("%s sees %s's review of an open item", r[0], rv.Reviewer)
			}
		}
	}
	if _, err := post("bob", "hq-1", `"PASS"`); !errs.Is(err, errs.Conflict) {
		t.Fatalf("a second review of one criterion: %v", err)
	}
	view, err := post("bob", "hq-2", `0.8`)
	if err != nil || view.State != review.Done || len(view.Reviews) != 4 {
		t.Fatalf("last review: %+v %v", view, err)
	}
	v, _ = svc.Verification(ctx, vid, func(string) bool { return true })
	h1, h2 := resultOf(v.Verification, "hq-1"), resultOf(v.Verification, "hq-2")
	// A 1-1 tie does not pass; PASS and 0.8 pass with their mean.
	if h1.Status != anticipate.StatusFail || h2.Status != anticipate.StatusPass || *h2.Score != 0.9 || h1.GradedBy != "queue:q1" {
		t.Fatalf("hq-1 %+v, hq-2 %+v", h1, h2)
	}
	if v.Verification.Verdict != anticipate.VerdictPass {
		t.Fatalf("verdict %s", v.Verification.Verdict)
	}
	if _, ok := rc.satisfied[itemID]; !ok {
		t.Fatal("the due time was not satisfied")
	}
	if page, _ := svc.ReviewItems(ctx, reviewer("alice"), "q1", "done", "", 0, ""); len(page.Items) != 1 {
		t.Fatalf("done items %d", len(page.Items))
	}
	// A replayed change opens no second item.
	if err := svc.Verify(ctx, v.Verification.AgentID, "plan-r1"); err != nil {
		t.Fatal(err)
	}
	if page, _ := svc.ReviewItems(ctx, reviewer("alice"), "q1", "open", "", 0, ""); len(page.Items) != 0 {
		t.Fatalf("a replay opened %d items", len(page.Items))
	}
}

// TestReviewQueueRefusals: a queue another tenant owns, an unknown or
// unserving queue (the criterion is left to direct grading), and a
// reviewer who may not read the agent.
func TestReviewQueueRefusals(t *testing.T) {
	svc, _, _ := gradingService(t, nil, JudgeRetry{})
	svc.reviewClock = &recordingClock{raised: map[string]time.Time{}, satisfied: map[string]time.Time{}}
	ctx := context.Background()
	if _, _, err := svc.PutReviewQueue(ctx, []string{"agent-a"}, "qa", []byte(`{"reviewers":["alice"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.PutReviewQueue(ctx, []string{"agent-b"}, "qa", []byte(`{"reviewers":["mallory"]}`)); !errs.Is(err, errs.NotFound) {
		t.Fatalf("another tenant's replace: %v", err)
	}
	if _, err := svc.ReviewQueue(ctx, []string{"agent-b"}, "qa"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("another tenant's read: %v", err)
	}
	if err := svc.DeleteReviewQueue(ctx, []string{"agent-b"}, "qa"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("another tenant's delete: %v", err)
	}
	if qs, _ := svc.ReviewQueues(ctx, []string{"agent-b"}); len(qs) != 0 {
		t.Fatalf("another tenant lists %v", qs)
	}
	// qa serves agent-a only: the seed's agent's criterion is not sent.
	vid := reviewedPlan(t, svc, "plan-r2", human("hq-1", "qa"), human("hq-2", "nope"))
	v, _ := svc.Verification(ctx, vid, func(string) bool { return true })
	for _, id := range []string{"hq-1", "hq-2"} {
		if ev := resultOf(v.Verification, id).Evidence; !strings.Contains(ev, "does not exist or does not serve") {
			t.Fatalf("%s evidence %q", id, ev)
		}
	}
	if _, err := svc.SubmitGrade(ctx, vid, "hq-1", 1, "", "human:eve", func(string) bool { return true }); err != nil {
		t.Fatalf("direct grade of a criterion no queue took: %v", err)
	}
	// A reviewer whose token may not read the agent sees no item.
	if _, _, err := svc.PutReviewQueue(ctx, []string{"*"}, "qall", []byte(`{"reviewers":["alice"]}`)); err != nil {
		t.Fatal(err)
	}
	vid = reviewedPlan(t, svc, "plan-r3", human("hq-1", "qall"))
	itemID := review.ItemID(vid, "qall", review.Grading, "")
	outsider := Reviewer{Principal: "alice", Agents: []string{"agent-a"}, May: func(a string) bool { return a == "agent-a" }}
	if _, err := svc.ReviewItem(ctx, outsider, "qall", itemID); !errs.Is(err, errs.NotFound) {
		t.Fatalf("item read by a token not acting for its agent: %v", err)
	}
	if _, err := svc.SubmitReview(ctx, outsider, "qall", itemID, []byte(`{"criterionId":"hq-1","grade":"PASS"}`)); !errs.Is(err, errs.NotFound) {
		t.Fatalf("review by a token not acting for its agent: %v", err)
	}
	if _, err := svc.ReviewItem(ctx, reviewer("alice"), "qa", itemID); !errs.Is(err, errs.NotFound) {
		t.Fatalf("item read through another queue: %v", err)
	}
}

// TestReviewDueRepaired: a watcher that is down when the item opens, and
// again when its reviews are in, leaves the item to RepairReviews, which
// raises its due time once the watcher is back and, later, satisfies it;
// an item reviewed before its due time was ever raised gets none (it
// could only lapse a review that was in time); an agent without a card,
// or a due time the watcher refuses, gets a note instead of endless
// retries.
func TestReviewDueRepaired(t *testing.T) {
	svc, _, clock := gradingService(t, nil, JudgeRetry{})
	rc := &recordingClock{raised: map[string]time.Time{}, satisfied: map[string]time.Time{}, fail: true}
	svc.reviewClock = rc
	ctx := context.Background()
	if _, _, err := svc.PutReviewQueue(ctx, []string{"*"}, "q1", []byte(`{"reviewers":["alice"]}`)); err != nil {
		t.Fatal(err)
	}
	vid := reviewedPlan(t, svc, "plan-r4", human("hq-1", "q1"))
	itemID := review.ItemID(vid, "q1", review.Grading, "")
	if n, _ := svc.RepairReviews(ctx, time.Minute, 10); n != 0 || len(rc.raised) != 0 {
		t.Fatalf("repaired %d before the item was late", n)
	}
	clock.Add(2 * time.Minute)
	if n, err := svc.RepairReviews(ctx, time.Minute, 10); n != 0 || err == nil {
		t.Fatalf("repaired %d with the watcher down (%v)", n, err)
	}
	rc.fail = false
	// The failed attempt moved the item to the back of the line.
	if n, _ := svc.RepairReviews(ctx, time.Minute, 10); n != 0 {
		t.Fatalf("repaired %d right after a failed attempt", n)
	}
	clock.Add(2 * time.Minute)
	if n, err := svc.RepairReviews(ctx, time.Minute, 10); n != 1 || err != nil {
		t.Fatalf("repaired %d: %v", n, err)
	}
	if _, ok := rc.raised[itemID]; !ok {
		t.Fatal("not raised")
	}
	rc.fail = true
	if _, err := svc.SubmitReview(ctx, reviewer("alice"), "q1", itemID, []byte(`{"criterionId":"hq-1","grade":"PASS"}`)); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Minute)
	rc.fail = false
	if n, err := svc.RepairReviews(ctx, time.Minute, 10); n != 1 || err != nil {
		t.Fatalf("repaired %d: %v", n, err)
	}
	if _, ok := rc.satisfied[itemID]; !ok {
		t.Fatal("not satisfied")
	}
	clock.Add(2 * time.Minute)
	if n, _ := svc.RepairReviews(ctx, time.Minute, 10); n != 0 {
		t.Fatalf("repaired %d again", n)
	}

	// Reviewed while the watcher was down from the start: no due time.
	rc.fail = true
	vid = reviewedPlan(t, svc, "plan-r6", human("hq-1", "q1"))
	early := review.ItemID(vid, "q1", review.Grading, "")
	if _, err := svc.SubmitReview(ctx, reviewer("alice"), "q1", early, []byte(`{"criterionId":"hq-1","grade":"PASS"}`)); err != nil {
		t.Fatal(err)
	}
	rc.fail = false
	clock.Add(2 * time.Minute)
	_, _ = svc.RepairReviews(ctx, time.Minute, 10)
	if _, ok := rc.raised[early]; ok {
		t.Fatal("an item reviewed before its due time was raised got one")
	}

	rc.noCard = true
	vid = reviewedPlan(t, svc, "plan-r5", human("hq-1", "q1"))
	it, err := svc.ReviewItem(ctx, reviewer("alice"), "q1", review.ItemID(vid, "q1", review.Grading, ""))
	if err != nil || !strings.Contains(it.DueNote, "no Agent Card") || it.DueExpectationID != "" {
		t.Fatalf("item without a card: %+v %v", it, err)
	}
	rc.noCard, rc.refuse = false, true
	vid = reviewedPlan(t, svc, "plan-r7", human("hq-1", "q1"))
	it, err = svc.ReviewItem(ctx, reviewer("alice"), "q1", review.ItemID(vid, "q1", review.Grading, ""))
	if err != nil || !strings.Contains(it.DueNote, "refused") {
		t.Fatalf("item whose due time is refused: %+v %v", it, err)
	}
	clock.Add(2 * time.Minute)
	if n, err := svc.RepairReviews(ctx, time.Minute, 10); n != 0 || err != nil {
		t.Fatalf("a refused due time is tried again: %d %v", n, err)
	}
}

// TestCalibrationSample: the judge's grade of a calibrated HEURISTIC
// criterion in the sample opens a calibration item (the judge's grade
// hidden until done) whose reviews leave the VERIFY as the judge graded
// it and feed the judge's agreement.
func TestCalibrationSample(t *testing.T) {
	j := &scriptedJudge{}
	svc, jobs, _ := gradingService(t, j, JudgeRetry{})
	svc.reviewClock = &recordingClock{raised: map[string]time.Time{}, satisfied: map[string]time.Time{}}
	ctx := context.Background()
	if _, _, err := svc.PutReviewQueue(ctx, []string{"*"}, "cal", []byte(`{"reviewers":["alice","bob"],"reviewsPerItem":2}`)); err != nil {
		t.Fatal(err)
	}
	cal := map[string]any{"criterion_id": "h-cal", "description": "d", "measurement": "HEURISTIC", "assertion": "The summary is professional",
		"weight": 1, "queue": "cal", "calibrate": map[string]any{"sample": 1}}
	vid := reviewedPlan(t, svc, "plan-c1", cal)
	for _, job := range jobs.take() {
		if _, err := svc.GradeCriterion(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	v, _ := svc.Verification(ctx, vid, func(string) bool { return true })
	if r := resultOf(v.Verification, "h-cal"); r.Status != anticipate.StatusPass || r.GradedBy != "model:test" {
		t.Fatalf("judged %+v", r)
	}
	itemID := review.ItemID(vid, "cal", review.Calibration, "h-cal")
	it, err := svc.ReviewItem(ctx, reviewer("alice"), "cal", itemID)
	if err != nil || it.Purpose != review.Calibration || it.Criteria[0].Judge != nil {
		t.Fatalf("calibration item %+v %v", it, err)
	}
	for _, who := range []string{"alice", "bob"} {
		if _, err := svc.SubmitReview(ctx, reviewer(who), "cal", itemID, []byte(`{"criterionId":"h-cal","grade":"FAIL"}`)); err != nil {
			t.Fatal(err)
		}
	}
	after, _ := svc.Verification(ctx, vid, func(string) bool { return true })
	if after.Verification.DDNASignature != v.Verification.DDNASignature {
		t.Fatal("a calibration review changed the VERIFY")
	}
	ag, err := svc.ReviewAgreement(ctx, reviewer("alice"), "cal")
	if err != nil || len(ag.Criteria) != 1 || ag.Criteria[0].Judge == nil || ag.Criteria[0].Judge.Items != 1 || *ag.Criteria[0].Judge.Observed != 0 {
		t.Fatalf("agreement %+v %v", ag, err)
	}
	if it, _ := svc.ReviewItem(ctx, reviewer("alice"), "cal", itemID); it.Criteria[0].Judge == nil || !it.Criteria[0].Judge.Pass {
		t.Fatalf("done calibration item hides the judge: %+v", it.Criteria)
	}
}

// TestReviewItemWorstCaseSize: an item at every bound (anticipate.MaxQueued
// criteria with the longest description and assertion, five reviewers
// each commenting the longest comment of characters JSON escapes, the
// resolutions' rationales) stays well within a DynamoDB item (400 KB).
func TestReviewItemWorstCaseSize(t *testing.T) {
	long := strings.Repeat(`"`, anticipate.MaxDescriptionLen)
	comment := strings.Repeat(`\`, review.MaxCommentLen)
	r := &reviewItemRecord{Item: review.Item{ItemID: "rvi-x", QueueID: strings.Repeat("q", 64), State: review.Done, Resolved: map[string]review.Resolution{}}}
	for i := range anticipate.MaxQueued {
		c := anticipate.CategorizedCriterion{Criterion: anticipate.Criterion{CriterionID: strings.Repeat("c", 120) + fmt.Sprint(i), Description: long, Assertion: long}}
		r.Criteria = append(r.Criteria, reviewCriterion(c, anticipate.GradingPolicy{}))
		for j := range review.MaxReviewsPerItem {
			who := strings.Repeat("r", 120) + fmt.Sprint(j)
			if i == 0 {
				r.Assignees = append(r.Assignees, who)
			}
			r.Reviews = append(r.Reviews, review.Review{Reviewer: who, CriterionID: c.CriterionID, Grade: "0.123456789", Comment: comment, At: "2026-12-06T16:00:00.123456789Z"})
		}
		r.Resolved[c.CriterionID] = review.Resolution{Rationale: strings.Repeat(`"`, review.MaxRationaleLen)}
	}
	it, err := reviewItemItem(r)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(it.Data); n > 300_000 {
		t.Fatalf("the worst-case item is %d bytes", n)
	} else {
		t.Logf("the worst-case item is %d bytes", n)
	}
}

// TestReviewItemsPageByBytes: a listing of large items stops near
// reviewItemsPageBytes and its token continues exactly after the last
// item shown.
func TestReviewItemsPageByBytes(t *testing.T) {
	svc, _, _ := gradingService(t, nil, JudgeRetry{})
	svc.reviewClock = &recordingClock{raised: map[string]time.Time{}, satisfied: map[string]time.Time{}}
	ctx := context.Background()
	if _, _, err := svc.PutReviewQueue(ctx, []string{"*"}, "big", []byte(`{"reviewers":["alice"]}`)); err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("x", anticipate.MaxDescriptionLen)
	const plans = 40
	for p := range plans {
		var crits []map[string]any
		for i := range anticipate.MaxQueued {
			c := human(fmt.Sprintf("hq-%d", i), "big")
			c["description"], c["assertion"] = text, text
			crits = append(crits, c)
		}
		reviewedPlan(t, svc, fmt.Sprintf("plan-big-%02d", p), crits...)
	}
	seen := map[string]bool{}
	pages, token := 0, ""
	for {
		page, err := svc.ReviewItems(ctx, reviewer("alice"), "big", "", "alice", 0, token)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		b, _ := json.Marshal(page)
		if len(page.Items) > 1 && len(b) > 2*reviewItemsPageBytes {
			t.Fatalf("a page of %d items is %d bytes", len(page.Items), len(b))
		}
		for _, it := range page.Items {
			if seen[it.ItemID] {
				t.Fatalf("item %s listed twice", it.ItemID)
			}
			seen[it.ItemID] = true
		}
		if token = page.NextToken; token == "" {
			break
		}
	}
	if len(seen) != plans || pages < 2 {
		t.Fatalf("%d items over %d pages", len(seen), pages)
	}
}
