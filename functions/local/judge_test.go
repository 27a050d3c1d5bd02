package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/store/dynamo/dynamotest"
)

// TestModelJudgeThatHangsThenAnswers runs the server as a user does, on the
// embedded default and in the local AWS mode (which creates the grading
// queue as the stack does), with a model judge that hangs at first: the
// VERIFY is there at once with its HEURISTIC criterion PENDING, and graded
// soon after the judge answers. Before the local AWS mode created the
// grading queue, the judge there was never called.
func TestModelJudgeThatHangsThenAnswers(t *testing.T) {
	bin := buildServer(t)
	for _, mode := range []string{"embedded", "aws"} {
		t.Run(mode, func(t *testing.T) {
			var hanging atomic.Bool
			hanging.Store(true)
			release := make(chan struct{})
			var calls atomic.Int64
			judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				io.Copy(io.Discard, r.Body)
				if hanging.Load() {
					select {
					case <-release:
					case <-r.Context().Done():
						return
					}
				}
				w.Write([]byte(`{"score": 0.9, "rationale": "reads well"}`))
			}))
			defer judge.Close()
			args := []string{"-data", t.TempDir(), "-judge-url", judge.URL, "-allow-private-judge"}
			if mode == "aws" {
				if testing.Short() {
					t.Skip("-short: the AWS mode runs against the emulator in the full run")
				}
				endpoint := dynamotest.Start(t)
				table := fmt.Sprintf("local-judge-%d", time.Now().UnixNano())
				args = append(args, "-aws-endpoint", endpoint, "-table", table, "-schedule-group", table)
			}
			s := startServer(t, bin, args...)
			defer s.kill9()

			plan := "plan-" + mode
			body := heuristicAnticipate(t, "ant-"+mode, plan)
			if code, b := s.call(t, "POST", "/v1/anticipations", body); code != 201 {
				t.Fatalf("ANTICIPATE: %d %s", code, b)
			}
			var declared struct {
				Digest string `json:"d_dna_signature"`
			}
			json.Unmarshal(body, &declared)
			for i, ev := range []map[string]any{
				{"message_type": "TOOL_REQUEST", "tool": "iam_create_user", "arguments": map[string]any{"username": "alice"}},
				{"message_type": "TOOL_RESULT", "tool": "iam_create_user", "status": "SUCCESS"},
				{"message_type": "STEP_COMPLETE"},
				{"message_type": "OUTCOME", "variables": map[string]any{"target_username": "alice"}, "observations": []any{
					map[string]any{"call": "user_exists", "args": []any{"alice"}, "value": true},
					map[string]any{"call": "group_member", "args": []any{"alice", "engineering"}, "value": true},
					map[string]any{"call": "policy_count", "args": []any{"alice"}, "value": 3},
					map[string]any{"call": "group_policy_count", "args": []any{"engineering"}, "value": 3}}},
				{"message_type": "PLAN_COMPLETE"},
			} {
				ev["protocol_version"], ev["event_id"], ev["timestamp"] = "4.1", fmt.Sprintf("%s-%d", plan, i), time.Now().UTC().Format(time.RFC3339Nano)
				if code, b := s.call(t, "POST", "/v1/executions/"+plan+"/events", ev); code != 202 {
					t.Fatalf("event %d: %d %s", i, code, b)
				}
			}
			vid := anticipate.VerificationIDFor(declared.Digest, plan)
			read := func() (int, anticipate.Verification) {
				code, b := s.call(t, "GET", "/v1/verifications/"+vid, nil)
				var v anticipate.Verification
				if code == 200 {
					if err := json.Unmarshal(b, &v); err != nil {
						t.Fatal(err)
					}
				}
				return code, v
			}
			var v anticipate.Verification
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				var code int
				if code, v = read(); code == 200 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no VERIFY 20 s after PLAN_COMPLETE (GET %d)", code)
				}
			}
			if r := criterion(v, "tone"); r.Status != anticipate.StatusPending {
				t.Fatalf("while the judge hangs: %+v", r)
			}
			for deadline := time.Now().Add(30 * time.Second); calls.Load() == 0; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the judge was never called")
				}
			}
			time.Sleep(2 * time.Second)
			hanging.Store(false)
			close(release)
			answered := time.Now()
			for deadline := answered.Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
				if _, v = read(); criterion(v, "tone").Status != anticipate.StatusPending {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still PENDING a minute after the judge answered (%d calls)", calls.Load())
				}
			}
			t.Logf("%s: graded %s after the judge answered (%d judge calls)", mode, time.Since(answered).Round(10*time.Millisecond), calls.Load())
			if r := criterion(v, "tone"); r.GradedBy == "" {
				t.Fatalf("graded: %+v", r)
			}
		})
	}
}

// heuristicAnticipate is the seed's ANTICIPATE with ids of its own, graded
// by a model, with one HEURISTIC criterion ("tone"), signed.
func heuristicAnticipate(t *testing.T, antID, planID string) []byte {
	t.Helper()
	raw, err := os.ReadFile("../../internal/anticipate/testdata/seed_anticipate.json")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["anticipation_id"], m["plan_id"] = antID, planID
	m["grading_policy"].(map[string]any)["grader_type"] = "MODEL"
	m["grading_policy"].(map[string]any)["passing_threshold"] = 0.1
	ex := m["expectations"].(map[string]any)
	ex["outcome_criteria"] = append(ex["outcome_criteria"].([]any), map[string]any{"criterion_id": "tone",
		"description": "Tone is professional", "measurement": "HEURISTIC", "assertion": "The summary is professional", "weight": 0.1})
	b, _ := json.Marshal(m)
	signed, err := anticipate.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func criterion(v anticipate.Verification, id string) anticipate.Result {
	for _, r := range v.Results {
		if r.CriterionID == id {
			return r
		}
	}
	return anticipate.Result{}
}
