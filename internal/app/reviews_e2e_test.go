package app

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/alert"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evaluation"
	"github.com/agentclock/clockwork/internal/review"
)

// reviewLabels is the table the reviewers follow: for the i-th plan, the
// grade of its first and of its second assigned reviewer (true: PASS).
// Its Cohen's kappa is checked with scikit-learn.
var reviewLabels = [][2]bool{
	{true, true}, {true, true}, {true, true}, {true, false}, {true, false}, {true, true},
	{false, false}, {false, false}, {false, true}, {false, false}, {true, true}, {false, false},
}

// scenarioReviewQueues: a queue of three reviewers taking two reviews per
// item. Twelve plans whose HUMAN criterion names the queue each become an
// item when they complete, assigned round-robin; each reviewer's inbox
// holds what was assigned to them; the reviews follow reviewLabels, and
// each item's last review grades its VERIFY by majority (a split does not
// pass). The queue's agreement is Cohen's kappa of the table, as
// scikit-learn computes it. A plan in a queue due in two seconds that no
// one reviews lapses (kind review-due), and the agent's alert rule sends
// the lapse to a webhook; its late review still grades the VERIFY.
func scenarioReviewQueues(t *testing.T) {
	// The judge grades the calibrated criterion PASS.
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"score": 0.9, "rationale": "polite enough"}`))
	}))
	defer judge.Close()
	e := startEnv(t, func(c *Config) { c.JudgeURL = judge.URL; c.AllowPrivateJudge = true })
	register(t, e, "1.0")
	secret := alert.NewWebhookSecret()
	hook := webhookReceiver(t, secret)
	e.must(201, e.call("PUT", "/v1/channels/rv-hook", map[string]any{"type": "webhook", "url": hook.srv.URL + "/hook", "secret": secret}))
	e.must(200, e.call("PUT", "/v1/agents/"+agentID+"/alerts", map[string]any{"rules": []any{
		map[string]any{"on": []string{"expectation.lapsed"}, "channels": []string{"rv-hook"}}}}))

	// Bad input names the field and creates nothing.
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/review-queues/qa", map[string]any{"reviewers": []string{"alice"}, "reviewsPerItem": 2})), "reviewsPerItem")
	hasErrorPath(t, e.must(400, e.call("PUT", "/v1/review-queues/qa", map[string]any{"reviewers": []string{"alice"}, "resolve": "loudest"})), "resolve")
	e.must(404, e.call("GET", "/v1/review-queues/qa", nil))
	e.must(201, e.call("PUT", "/v1/review-queues/qa", map[string]any{"reviewers": []string{"alice", "bob", "carol"}, "reviewsPerItem": 2, "due": "PT1H", "resolve": "majority"}))
	e.must(201, e.call("PUT", "/v1/review-queues/late", map[string]any{"reviewers": []string{"carol"}, "due": "PT2S"}))
	// Another tenant neither sees nor changes them.
	e.must(404, e.call("GET", "/v1/review-queues/qa", nil, tenantA))
	var none evaluation.ReviewItemsPage
	e.must(200, e.call("GET", "/v1/review-queues/qa/items", nil, tenantA)).json(t, &none)
	e.must(404, e.call("PUT", "/v1/review-queues/qa", map[string]any{"reviewers": []string{"tenant-a"}}, tenantA))

	declare := func(ant, plan, queue string) {
		crit := map[string]any{"criterion_id": "tone", "description": "The reply is polite", "measurement": "HUMAN", "assertion": "A reviewer finds the reply polite", "weight": 1, "queue": queue}
		if queue == "calibration" {
			// The judge grades it; every grade is also sent to people.
			crit["measurement"], crit["calibrate"] = "HEURISTIC", map[string]any{"sample": 1}
		}
		e.must(201, e.call("POST", "/v1/anticipations", reviewedAnticipation(t, ant, plan, crit)))
		runPlan(t, e, plan, 2, nil, allGood())
	}
	for i := range reviewLabels {
		declare(fmt.Sprintf("ant-rq-%02d", i), fmt.Sprintf("plan-rq-%02d", i), "qa")
	}
	declare("ant-late", "plan-late", "late")
	e.must(201, e.call("PUT", "/v1/review-queues/calibration", map[string]any{"reviewers": []string{"alice", "bob"}, "reviewsPerItem": 2}))
	declare("ant-cal", "plan-cal", "calibration")

	// The items, oldest first, once every VERIFY has opened its own.
	var items []evaluation.ReviewItemView
	deadline := time.Now().Add(60 * time.Second)
	for len(items) < len(reviewLabels) {
		var page evaluation.ReviewItemsPage
		e.must(200, e.call("GET", "/v1/review-queues/qa/items?state=open", nil)).json(t, &page)
		items = page.Items
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d review items opened", len(items), len(reviewLabels))
		}
		time.Sleep(50 * time.Millisecond)
	}
	byPlan := map[string]evaluation.ReviewItemView{}
	perReviewer := map[string]int{}
	for _, it := range items {
		byPlan[it.PlanID] = it
		if len(it.Assignees) != 2 || it.Assignees[0] == it.Assignees[1] || it.State != review.Open || !strings.HasPrefix(it.DueExpectationID, "review:") {
			t.Fatalf("item %+v", it)
		}
		for _, a := range it.Assignees {
			perReviewer[a]++
		}
	}
	// Round-robin: 24 assignments over three reviewers, 8 each.
	if perReviewer["alice"] != 8 || perReviewer["bob"] != 8 || perReviewer["carol"] != 8 {
		t.Fatalf("assignments per reviewer %v", perReviewer)
	}
	e.must(200, e.call("GET", "/v1/review-queues/qa/items", nil, tenantA)).json(t, &none)
	if len(none.Items) != 0 {
		t.Fatalf("another tenant lists %d items", len(none.Items))
	}
	tokens := map[string]string{"alice": aliceToken, "bob": bobToken, "carol": carolToken}
	for name, tok := range tokens {
		var inbox evaluation.ReviewItemsPage
		e.must(200, e.call("GET", "/v1/review-queues/qa/items?assignee=me", nil, tok)).json(t, &inbox)
		if len(inbox.Items) != 8 {
			t.Fatalf("%s's inbox holds %d items", name, len(inbox.Items))
		}
	}
	// The item's due time is an expectation of the plan's agent.
	first := byPlan["plan-rq-00"]
	var dueRec struct {
		Expectation struct{ Kind string } `json:"expectation"`
		State       string                `json:"state"`
	}
	e.must(200, e.call("GET", "/v1/agents/"+agentID+"/expectations/"+first.DueExpectationID, nil)).json(t, &dueRec)
	if dueRec.Expectation.Kind != "review-due" || dueRec.State != "open" {
		t.Fatalf("due expectation %+v", dueRec)
	}
	// Refusals: bad grade, someone not assigned, a reader, a direct grade.
	reviewPath := func(it evaluation.ReviewItemView) string {
		return "/v1/review-queues/qa/items/" + it.ItemID + "/reviews"
	}
	hasErrorPath(t, e.must(400, e.call("POST", reviewPath(first), map[string]any{"criterionId": "tone", "grade": "GOOD"}, tokens[first.Assignees[0]])), "grade")
	outsider := map[string]bool{"alice": true, "bob": true, "carol": true}
	delete(outsider, first.Assignees[0])
	delete(outsider, first.Assignees[1])
	for name := range outsider {
		e.must(404, e.call("POST", reviewPath(first), map[string]any{"criterionId": "tone", "grade": "PASS"}, tokens[name]))
	}
	e.must(403, e.call("POST", reviewPath(first), map[string]any{"criterionId": "tone", "grade": "PASS"}, readerToken))
	e.must(409, e.call("POST", "/v1/verifications/"+first.VerificationID+"/grades", map[string]any{"criterion_id": "tone", "score": 1}))

	// The reviews, by the table.
	var v anticipate.Verification
	var slot1, slot2 []int
	for i, labels := range reviewLabels {
		it := byPlan[fmt.Sprintf("plan-rq-%02d", i)]
		for slot, pass := range labels {
			grade := "FAIL"
			if pass {
				grade = "PASS"
			}
			var view evaluation.ReviewItemView
			e.must(201, e.call("POST", reviewPath(it), map[string]any{"criterionId": "tone", "grade": grade, "comment": "slot " + fmt.Sprint(slot)}, tokens[it.Assignees[slot]])).json(t, &view)
			if slot == 0 && i == 0 {
				// Blind: the other assignee, listing the first one's
				// items, sees no review of the open item.
				var peek evaluation.ReviewItemsPage
				e.must(200, e.call("GET", "/v1/review-queues/qa/items?assignee="+it.Assignees[0], nil, tokens[it.Assignees[1]])).json(t, &peek)
				for _, p := range peek.Items {
					if len(p.Reviews) != 0 {
						t.Fatalf("%s sees %s's open reviews: %+v", it.Assignees[1], it.Assignees[0], p.Reviews)
					}
				}
			}
			if want := pickOf(slot == 1, review.Done, review.Open); view.State != want {
				t.Fatalf("after review %d of %s: state %s", slot+1, it.ItemID, view.State)
			}
		}
		slot1, slot2 = append(slot1, b2i(labels[0])), append(slot2, b2i(labels[1]))
		e.must(200, e.call("GET", "/v1/verifications/"+it.VerificationID, nil)).json(t, &v)
		r := result(t, v, "tone")
		wantPass := labels[0] && labels[1] // of two, a split is no majority
		if (r.Status == anticipate.StatusPass) != wantPass || r.GradedBy != "queue:qa" || v.Verdict != pickOf(wantPass, anticipate.VerdictPass, anticipate.VerdictFail) {
			t.Fatalf("plan %d graded %+v, verdict %s", i, r, v.Verdict)
		}
		if err := anticipate.CheckSeal(&v); err != nil {
			t.Fatal(err)
		}
	}
	e.must(409, e.call("POST", reviewPath(first), map[string]any{"criterionId": "tone", "grade": "PASS"}, tokens[first.Assignees[0]]))
	e.must(200, e.call("GET", "/v1/agents/"+agentID+"/expectations/"+first.DueExpectationID, nil)).json(t, &dueRec)
	if dueRec.State != "satisfied" {
		t.Fatalf("the due time of a reviewed item is %s", dueRec.State)
	}

	// On AWS the done items are read from an index a moment behind.
	var ag evaluation.AgreementView
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		e.must(200, e.call("GET", "/v1/review-queues/qa/agreement", nil, aliceToken)).json(t, &ag)
		if len(ag.Criteria) == 1 && ag.Criteria[0].Items == len(reviewLabels) || time.Now().After(deadline) {
			break
		}
	}
	if len(ag.Criteria) != 1 || ag.Criteria[0].Method != "cohen" || ag.Criteria[0].Items != len(reviewLabels) || ag.Criteria[0].Kappa == nil {
		t.Fatalf("agreement %+v", ag)
	}
	want := sklearnKappa(t, slot1, slot2)
	if math.Abs(*ag.Criteria[0].Kappa-want) > 1e-6 {
		t.Fatalf("kappa %v, scikit-learn %v", *ag.Criteria[0].Kappa, want)
	}
	t.Logf("Cohen's kappa of %d items: %.6f (scikit-learn %.6f)", ag.Criteria[0].Items, *ag.Criteria[0].Kappa, want)

	// The judge's grade of the calibrated criterion went to people too;
	// their FAIL leaves the VERIFY as the judge graded it, and the
	// judge's agreement counts it.
	var cal evaluation.ReviewItemsPage
	for deadline := time.Now().Add(30 * time.Second); len(cal.Items) == 0; time.Sleep(100 * time.Millisecond) {
		e.must(200, e.call("GET", "/v1/review-queues/calibration/items?assignee=me", nil, bobToken)).json(t, &cal)
		if time.Now().After(deadline) {
			t.Fatal("no calibration item")
		}
	}
	if it := cal.Items[0]; it.Purpose != review.Calibration || it.Criteria[0].Judge != nil {
		t.Fatalf("calibration item %+v", it)
	}
	for _, tok := range []string{aliceToken, bobToken} {
		e.must(201, e.call("POST", "/v1/review-queues/calibration/items/"+cal.Items[0].ItemID+"/reviews", map[string]any{"criterionId": "tone", "grade": "FAIL"}, tok))
	}
	e.must(200, e.call("GET", "/v1/verifications/"+cal.Items[0].VerificationID, nil)).json(t, &v)
	if r := result(t, v, "tone"); r.Status != anticipate.StatusPass || r.GradedBy != "model:judge" {
		t.Fatalf("calibrated criterion %+v", r)
	}
	var calAg evaluation.AgreementView
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		e.must(200, e.call("GET", "/v1/review-queues/calibration/agreement", nil)).json(t, &calAg)
		if len(calAg.Criteria) == 1 && calAg.Criteria[0].Judge != nil || time.Now().After(deadline) {
			break
		}
	}
	if len(calAg.Criteria) != 1 || calAg.Criteria[0].Judge == nil || calAg.Criteria[0].Judge.Items != 1 || *calAg.Criteria[0].Judge.Observed != 0 {
		t.Fatalf("judge agreement %+v", calAg)
	}

	// The late queue's item lapses unreviewed, and alerts.
	hook.waitFor("review-due lapse", func(g []map[string]any) bool {
		for _, m := range g {
			if m["type"] == string(alert.Lapsed) && strings.Contains(fmt.Sprint(m["data"]), "review-due") {
				return true
			}
		}
		return false
	})
	var late evaluation.ReviewItemsPage
	e.must(200, e.call("GET", "/v1/review-queues/late/items?assignee=me", nil, carolToken)).json(t, &late)
	if len(late.Items) != 1 {
		t.Fatalf("carol's late inbox %+v", late)
	}
	e.must(201, e.call("POST", "/v1/review-queues/late/items/"+late.Items[0].ItemID+"/reviews", map[string]any{"criterionId": "tone", "grade": 0.9}, carolToken))
	e.must(200, e.call("GET", "/v1/verifications/"+late.Items[0].VerificationID, nil)).json(t, &v)
	if r := result(t, v, "tone"); r.Status != anticipate.StatusPass || *r.Score != 0.9 {
		t.Fatalf("late review graded %+v", r)
	}
}

// queuedAnticipation is agent-1's ANTICIPATE of plan whose one
// criterion, tone, is HUMAN and reviewed in queue.
func queuedAnticipation(t *testing.T, ant, plan, queue string) []byte {
	return reviewedAnticipation(t, ant, plan, map[string]any{"criterion_id": "tone", "description": "The reply is polite",
		"measurement": "HUMAN", "assertion": "A reviewer finds the reply polite", "weight": 1, "queue": queue})
}

// reviewedAnticipation is agent-1's ANTICIPATE of plan with the one
// criterion crit, under a COMPOSITE policy passing at 0.5.
func reviewedAnticipation(t *testing.T, ant, plan string, crit map[string]any) []byte {
	return variant(t, ant, plan, func(m map[string]any) {
		m["agent_id"] = agentID
		m["grading_policy"] = map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.5, "weighted_scoring": true, "fail_on_any_anti_criteria": false}
		m["expectations"] = map[string]any{"outcome_criteria": []any{crit}}
	})
}

func pickOf[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sklearnKappa is scikit-learn's cohen_kappa_score of two raters' labels,
// from the pinned virtualenv of internal/review/testdata.
func sklearnKappa(t *testing.T, x, y []int) float64 {
	t.Helper()
	py, err := exec.Command("bash", "../../scripts/pyvenv.sh", "review-kappa", "../review/testdata/requirements.txt", "3.10", "import sklearn, statsmodels").Output()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the scikit-learn virtualenv: %v", err)
		}
		t.Skipf("the scikit-learn virtualenv could not be built: %v", err)
	}
	in, _ := json.Marshal([][]int{x, y})
	cmd := exec.Command(strings.TrimSpace(string(py)), "-c", "import json,sys\nfrom sklearn.metrics import cohen_kappa_score\nx,y=json.load(sys.stdin)\nprint(cohen_kappa_score(x,y))")
	cmd.Stdin = strings.NewReader(string(in))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scikit-learn: %v", err)
	}
	var k float64
	if _, err := fmt.Sscan(string(out), &k); err != nil {
		t.Fatalf("scikit-learn answered %q", out)
	}
	return k
}
