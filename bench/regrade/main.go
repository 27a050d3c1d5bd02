// Command regrade measures re-grading stored executions (POST
// /v1/evaluations) on the embedded default: it stores -plans plans (the
// seed's ANTICIPATE each, their traces exported as OTLP/JSON, VERIFYd),
// then re-grades them twice and prints, for each, plans per second, the
// CPU per plan and the judge calls per second:
//
//   - with three DETERMINISTIC criteria (no judge call);
//
//   - with those and one HEURISTIC criterion, graded by a loopback judge
//     that answers at once (-judge-latency to slow it), so the figure is
//     the server's and the judge rate bound's (-judge-rate, default the
//     server's default).
//
//     go run ./bench/regrade
//     go run ./bench/regrade -plans 5000 -judge-rate 1000
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/evaluation"
)

func main() {
	plans := flag.Int("plans", 2000, "stored plans to re-grade (each a trace of 5 tool calls)")
	rate := flag.Float64("judge-rate", evaluation.DefaultEvaluationJudgeRate, "judge calls per second evaluations may make (-evaluation-judge-rate)")
	latency := flag.Duration("judge-latency", 0, "how long the loopback judge takes to answer")
	seedPath := flag.String("seed", "internal/anticipate/testdata/seed_anticipate.json", "the ANTICIPATE declared, renamed per plan")
	flag.Parse()
	if err := run(*plans, *rate, *latency, *seedPath); err != nil {
		fmt.Fprintln(os.Stderr, "regrade:", err)
		os.Exit(1)
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(plans int, rate float64, latency time.Duration, seedPath string) error {
	seed, err := os.ReadFile(seedPath)
	if err != nil {
		return err
	}
	var judgeCalls atomic.Int64
	judge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		judgeCalls.Add(1)
		time.Sleep(latency)
		w.Write([]byte(`{"score": 0.9, "rationale": "reads well"}`))
	}))
	defer judge.Close()
	dir, err := os.MkdirTemp("", "regrade-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	token := auth.Generate()
	authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "bench", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	a, err := app.Start(app.Config{DataDir: dir, Auth: authn, Log: slog.New(slog.DiscardHandler),
		JudgeURL: judge.URL, AllowPrivateJudge: true, EvaluationJudgeRate: rate})
	if err != nil {
		return err
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	call := func(method, path string, body []byte, want int) ([]byte, error) {
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out, nil
	}
	fmt.Printf("re-grading on the embedded default: %d stored plans (5 tool calls each), judge rate bound %g/s, judge latency %v\n", plans, rate, latency)
	began := time.Now()
	agent, err := store(plans, seed, call)
	if err != nil {
		return err
	}
	fmt.Printf("stored and VERIFYd in %v\n", time.Since(began).Round(time.Millisecond))
	det := []map[string]any{
		{"criterion_id": "booked", "description": "booked a flight", "measurement": "DETERMINISTIC", "assertion": "tool_invoked('book_flight')", "weight": 1},
		{"criterion_id": "in-order", "description": "searched first", "measurement": "DETERMINISTIC", "assertion": "trajectory_in_order(['search_flights', 'book_flight'])", "weight": 1, "category": "trajectory"},
		{"criterion_id": "calm", "description": "never escalated", "measurement": "DETERMINISTIC", "assertion": "escalation_count == 0", "weight": 1, "category": "anti"},
	}
	judged := append(append([]map[string]any{}, det...),
		map[string]any{"criterion_id": "tone", "description": "the itinerary reads well", "measurement": "HEURISTIC", "assertion": "The itinerary is clear", "weight": 1})
	fmt.Printf("%-34s %10s %12s %14s %10s\n", "criteria", "plans/s", "CPU/plan", "judge calls/s", "took")
	for _, c := range []struct {
		name     string
		criteria []map[string]any
	}{{"3 DETERMINISTIC", det}, {"3 DETERMINISTIC + 1 HEURISTIC", judged}} {
		body, _ := json.Marshal(map[string]any{"filter": map[string]any{"agentId": agent}, "criteria": c.criteria,
			"gradingPolicy": map[string]any{"grader_type": "COMPOSITE", "passing_threshold": 0.8, "weighted_scoring": true, "fail_on_any_anti_criteria": true}})
		calls0, cpu0, t0 := judgeCalls.Load(), cpu(), time.Now()
		out, err := call("POST", "/v1/evaluations", body, 202)
		if err != nil {
			return err
		}
		var ev struct {
			EvaluationID string
			State        string
			Progress     struct{ Done, Total int }
		}
		_ = json.Unmarshal(out, &ev)
		for ev.State == "running" {
			time.Sleep(20 * time.Millisecond)
			if out, err = call("GET", "/v1/evaluations/"+ev.EvaluationID+"?limit=1", nil, 200); err != nil {
				return err
			}
			_ = json.Unmarshal(out, &ev)
		}
		took, used, calls := time.Since(t0), cpu()-cpu0, judgeCalls.Load()-calls0
		if ev.State != "done" || ev.Progress.Done != plans {
			return fmt.Errorf("evaluation %s: %s, %d of %d", ev.EvaluationID, ev.State, ev.Progress.Done, ev.Progress.Total)
		}
		fmt.Printf("%-34s %10.0f %10.0fµs %14.1f %10v\n", c.name, float64(plans)/took.Seconds(), float64(used.Microseconds())/float64(plans),
			float64(calls)/took.Seconds(), took.Round(time.Millisecond))
	}
	return nil
}

// store declares the seed's ANTICIPATE for each plan (8 at once), exports
// every plan's trace as OTLP/JSON (100 plans an export) and waits until
// every plan has its VERIFY. It returns the agent.
func store(plans int, seed []byte, call func(method, path string, body []byte, want int) ([]byte, error)) (string, error) {
	var m map[string]any
	if err := json.Unmarshal(seed, &m); err != nil {
		return "", err
	}
	agent, _ := m["agent_id"].(string)
	var wg sync.WaitGroup
	errc := make(chan error, plans)
	sem := make(chan struct{}, 8)
	for p := range plans {
		m["anticipation_id"], m["plan_id"] = fmt.Sprintf("ant-%d", p), fmt.Sprintf("plan-%d", p)
		b, _ := json.Marshal(m)
		signed, err := anticipate.Sign(b)
		if err != nil {
			return "", err
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := call("POST", "/v1/anticipations", signed, 201); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errc:
		return "", err
	default:
	}
	str := func(k, v string) map[string]any {
		return map[string]any{"key": k, "value": map[string]any{"stringValue": v}}
	}
	at := time.Now().Add(-time.Hour)
	for lo := 0; lo < plans; lo += 100 {
		var spans []any
		for p := lo; p < min(plans, lo+100); p++ {
			plan := fmt.Sprintf("plan-%d", p)
			span := func(k int, name string, attrs ...map[string]any) {
				spans = append(spans, map[string]any{"traceId": fmt.Sprintf("%032x", p+1), "spanId": fmt.Sprintf("%016x", k+1), "name": name, "kind": 1,
					"startTimeUnixNano": fmt.Sprint(at.Add(time.Duration(k) * time.Millisecond).UnixNano()),
					"endTimeUnixNano":   fmt.Sprint(at.Add(time.Duration(k)*time.Millisecond + 500*time.Microsecond).UnixNano()),
					"attributes":        append([]map[string]any{str("aigp.plan_id", plan), str("gen_ai.agent.id", agent)}, attrs...)})
			}
			for i, tool := range []string{"search_flights", "book_flight", "search_hotels", "book_hotel", "send_itinerary"} {
				span(i+1, "execute_tool "+tool, str("gen_ai.operation.name", "execute_tool"), str("gen_ai.tool.name", tool), str("gen_ai.tool.call.arguments", `{"trip":"t"}`))
			}
			span(10, "invoke_agent", str("gen_ai.operation.name", "invoke_agent"), map[string]any{"key": "aigp.plan_root", "value": map[string]any{"boolValue": true}})
		}
		body, _ := json.Marshal(map[string]any{"resourceSpans": []any{map[string]any{"scopeSpans": []any{map[string]any{"spans": spans}}}}})
		out, err := call("POST", "/v1/traces", body, 200)
		if err != nil {
			return "", err
		}
		if bytes.Contains(out, []byte("rejectedSpans")) {
			return "", fmt.Errorf("spans rejected: %s", out)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for p := 0; p < plans; {
		out, err := call("GET", fmt.Sprintf("/v1/anticipations/ant-%d/verifications", p), nil, 200)
		if err != nil {
			return "", err
		}
		if bytes.Contains(out, []byte(`"verification_id"`)) {
			p++
			continue
		}
		if time.Now().After(deadline) {
			return "", errors.New("the VERIFYs were not all stored within 5 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return agent, nil
}
