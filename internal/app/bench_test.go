package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentclock/clockwork/internal/a2aout"
	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/auth"
	"github.com/agentclock/clockwork/internal/expect"
)

// The end-to-end benchmarks serve requests through the embedded runtime's
// HTTP handler (no network) with durable commits, from 32 concurrent
// goroutines as the load tool's connections, and count every allocation of
// the process: decoding, the domain, the store's commit and the change feed
// the commit triggers. Figures, not assertions:
//
//	go test -run '^$' -bench 'EndToEnd' -benchmem ./internal/app

type benchNullSender struct{}

func (benchNullSender) Send(context.Context, expect.Card, a2aout.Message) (string, error) {
	return "lapse-task", nil
}

const benchToken = "bench-token"

func startBenchApp(b *testing.B) *App {
	b.Helper()
	authn, err := auth.New([]auth.TokenSpec{{Token: benchToken, Principal: "bench", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	if err != nil {
		b.Fatal(err)
	}
	a, err := Start(Config{DataDir: b.TempDir(), Auth: authn, Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		AllowPrivateAgents: true, Sender: benchNullSender{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	card := fmt.Sprintf(`{"name":"bench","description":"bench agent","version":"1","supportedInterfaces":[{"url":"http://127.0.0.1:9/","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{"extensions":[{"uri":%q,"params":{"keepsTime":false,"lapseSkill":"lapse","kinds":[{"kind":"payment","subjectType":"invoice","describes":"An invoice is paid","basis":"contract"}]}}]},"defaultInputModes":["text/plain"],"defaultOutputModes":["text/plain"],"skills":[{"id":"lapse","name":"lapse","description":"handles lapses","tags":["lapse"]}]}`, expect.URI)
	if code := benchServe(a, "PUT", "/v1/agents/bench", []byte(card)); code != 200 {
		b.Fatalf("card: %d", code)
	}
	return a
}

func benchServe(a *App, method, path string, body []byte) int {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+benchToken)
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	a.Handler.ServeHTTP(w, req)
	return w.Code
}

func benchRaiseBody(n int64, due string) []byte {
	id := fmt.Sprintf("r-%d", n)
	return fmt.Appendf(nil, `{"taskId":"t","contextId":"c","expectations":[{"expectationId":%q,"kind":"payment","subject":{"type":"invoice","id":%q},"expects":"invoice is paid","satisfiedBy":{"factKey":"paid.%s"},"dueAt":%q,"basis":"contract"}]}`, id, id, id, due)
}

func benchFactBody(n int64, observed string) []byte {
	return fmt.Appendf(nil, `{"facts":[{"factKey":"paid.r-%d","observedAt":%q}]}`, n, observed)
}

// benchParallel runs op from 32 goroutines (the load tool's default
// connections) and reports requests per second.
func benchParallel(b *testing.B, op func(n int64) int) {
	var next atomic.Int64
	b.SetParallelism(max(1, 32/runtimeProcs()))
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code := op(next.Add(1)); code != 200 && code != 202 {
				b.Errorf("status %d", code)
				return
			}
		}
	})
	reportCPU(b, cpu0)
}

// processCPU is the process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports throughput and the process CPU time per request since
// cpu0, a figure that depends far less than req/s on what else the
// machine runs.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// BenchmarkEndToEndRaise raises one expectation per request.
func BenchmarkEndToEndRaise(b *testing.B) {
	a := startBenchApp(b)
	due := expect.FormatTime(time.Now().Add(240 * time.Hour))
	benchParallel(b, func(n int64) int {
		return benchServe(a, "POST", "/v1/agents/bench/expectations", benchRaiseBody(n, due))
	})
}

// BenchmarkEndToEndFact reports one fact per request, each satisfying one
// expectation raised before the timer starts.
func BenchmarkEndToEndFact(b *testing.B) {
	a := startBenchApp(b)
	due := expect.FormatTime(time.Now().Add(240 * time.Hour))
	for i := int64(1); i <= int64(b.N); i += 50 {
		var es []string
		for j := i; j < i+50 && j <= int64(b.N); j++ {
			var m map[string]any
			_ = json.Unmarshal(benchRaiseBody(j, due), &m)
			e, _ := json.Marshal(m["expectations"].([]any)[0])
			es = append(es, string(e))
		}
		body := `{"taskId":"t","contextId":"c","expectations":[` + join(es) + `]}`
		if code := benchServe(a, "POST", "/v1/agents/bench/expectations", []byte(body)); code != 200 {
			b.Fatalf("raise: %d", code)
		}
	}
	if err := a.Quiesce(context.Background()); err != nil {
		b.Fatal(err)
	}
	observed := expect.FormatTime(time.Now())
	benchParallel(b, func(n int64) int {
		return benchServe(a, "POST", "/v1/agents/bench/facts", benchFactBody(n, observed))
	})
}

// BenchmarkEndToEndEvent appends TOOL_REQUEST events to 32 plans (one per
// goroutine, as a plan's chain is written by one emitter at a time).
func BenchmarkEndToEndEvent(b *testing.B) {
	a := startBenchApp(b)
	seed, err := os.ReadFile("../anticipate/testdata/seed_anticipate.json")
	if err != nil {
		b.Fatal(err)
	}
	const plans = 32
	for c := range plans {
		var m map[string]any
		_ = json.Unmarshal(seed, &m)
		m["anticipation_id"], m["plan_id"] = fmt.Sprintf("ant-bench-%d", c), fmt.Sprintf("plan-bench-%d", c)
		raw, _ := json.Marshal(m)
		signed, err := anticipate.Sign(raw)
		if err != nil {
			b.Fatal(err)
		}
		if code := benchServe(a, "POST", "/v1/anticipations", signed); code != 201 {
			b.Fatalf("declare: %d", code)
		}
	}
	var plan atomic.Int64
	ts := expect.FormatTime(time.Now())
	b.SetParallelism(max(1, plans/runtimeProcs()))
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		p := plan.Add(1) - 1
		path := fmt.Sprintf("/v1/executions/plan-bench-%d/events", p)
		n := 0
		for pb.Next() {
			n++
			body := fmt.Appendf(nil, `{"event_id":"ev-%d","message_type":"TOOL_REQUEST","timestamp":%q,"tool":"iam_create_user","arguments":{"n":%d}}`, n, ts, n)
			if code := benchServe(a, "POST", path, body); code != 202 {
				b.Errorf("status %d", code)
				return
			}
		}
	})
	reportCPU(b, cpu0)
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }

func join(parts []string) string {
	var buf bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(p)
	}
	return buf.String()
}
