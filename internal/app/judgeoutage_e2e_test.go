package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/evaluation"
)

// scenarioJudgeOutage: a plan with ten HEURISTIC criteria completes while
// the model judge hangs (each call held until the caller gives up). Its
// VERIFY is stored within 5 s, the ten criteria PENDING and awaiting the
// judge; when the judge comes back every one is graded, still one VERIFY.
// On AWS the grading messages of the outage's last second are also lost
// (as a message dead-lettered is), and the sweep's repair puts their jobs
// back. The outage is
// scaled down (seconds for the ten minutes; the attempts at a
// criterion span about 45 minutes with the defaults). Before, VERIFY
// called the judge inside the change's processing: on AWS the stream
// batch timed out, was retried and finally discarded with no VERIFY.
func scenarioJudgeOutage(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	var calls, hung atomic.Int64
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		// Read the body first: only then does the server notice the
		// client hanging up (and end r's context).
		io.Copy(io.Discard, r.Body)
		if down.Load() {
			hung.Add(1)
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		w.Write([]byte(`{"score": 0.8, "rationale": "reads well"}`))
	}))
	defer judge.Close()
	e := startEnv(t, func(c *Config) {
		c.JudgeURL, c.AllowPrivateJudge = judge.URL, true
		c.JudgeRetry = evaluation.JudgeRetry{Attempts: 40, Base: 200 * time.Millisecond, Max: time.Second, CallTimeout: 300 * time.Millisecond}
	})
	body := variant(t, "ant-out", "plan-out", func(m map[string]any) {
		m["grading_policy"].(map[string]any)["grader_type"] = "MODEL"
		m["grading_policy"].(map[string]any)["passing_threshold"] = 0.1
		ex := m["expectations"].(map[string]any)
		for i := range 10 {
			ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{"criterion_id": fmt.Sprintf("h-%d", i),
				"description": "Tone is professional", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.1})
		}
	})
	e.must(201, e.call("POST", "/v1/anticipations", body))
	var declared struct {
		Digest string `json:"d_dna_signature"`
	}
	if err := json.Unmarshal(body, &declared); err != nil || declared.Digest == "" {
		t.Fatalf("the ANTICIPATE's digest: %v", err)
	}
	runPlan(t, e, "plan-out", 3, nil, allGood())
	completed := time.Now()
	// Read by its id (a consistent read; the listing is by an index, which
	// on AWS lags).
	vid := anticipate.VerificationIDFor(declared.Digest, "plan-out")
	var v anticipate.Verification
	for {
		r := e.call("GET", "/v1/verifications/"+vid, nil)
		if r.status == 200 {
			r.json(t, &v)
			break
		}
		if time.Since(completed) > 5*time.Second {
			t.Fatalf("no VERIFY within 5 s of PLAN_COMPLETE while the judge hangs (GET: %d %s)", r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	latency := time.Since(completed)
	for i := range 10 {
		if r := result(t, v, fmt.Sprintf("h-%d", i)); r.Status != anticipate.StatusPending || r.Evidence != "pending: awaiting the model judge" {
			t.Fatalf("h-%d during the outage: %+v", i, r)
		}
	}
	// The outage goes on until every criterion has been tried (and failed)
	// at least once; attempts fail and come back.
	for deadline := time.Now().Add(30 * time.Second); hung.Load() < 10; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d judge calls during 30 s of outage, want every criterion tried", hung.Load())
		}
	}
	if e.aws {
		e.loseGradingJobs.Store(true)
		defer e.loseGradingJobs.Store(false)
	}
	time.Sleep(time.Second)
	down.Store(false)
	recovered := time.Now()
	if e.aws {
		// Until a grading job was lost indeed (the clock's repair must
		// send it again), not merely for a while.
		time.Sleep(500 * time.Millisecond)
		for deadline := time.Now().Add(30 * time.Second); e.lostGradingJobs.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		e.loseGradingJobs.Store(false)
		if e.lostGradingJobs.Load() == 0 {
			t.Fatal("no grading job was lost while the queue lost them: the repair is not exercised")
		}
	}
	v = e.waitVerification("ant-out")
	for i := range 10 {
		if r := result(t, v, fmt.Sprintf("h-%d", i)); r.Status != anticipate.StatusPass || r.GradedBy != "model:judge" {
			t.Fatalf("h-%d after the judge recovered: %+v", i, r)
		}
	}
	if v.Verdict == anticipate.VerdictPending || !strings.HasPrefix(v.DDNASignature, "sha256:") {
		t.Fatalf("VERIFY after grading: verdict %s, %s", v.Verdict, v.DDNASignature)
	}
	t.Logf("VERIFY stored %s after PLAN_COMPLETE with the judge hanging; %d judge calls failed; all ten graded %s after the judge came back",
		latency.Round(time.Millisecond), hung.Load(), time.Since(recovered).Round(time.Millisecond))
}
