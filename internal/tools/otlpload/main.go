// Command otlpload measures OTLP ingest on the embedded default: it
// declares -plans ANTICIPATEs, then exports -spans tool spans to each
// plan through POST /v1/traces (OTLP protobuf, -batch spans per request,
// -conns requests at once), and prints spans ingested per second and the
// process's CPU per span (user + system, getrusage: the client's encoding
// included, a small share).
//
//	go run ./internal/tools/otlpload -plans 40 -spans 250
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"time"

	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	resourcev1 "go.opentelemetry.io/proto/otlp/resource/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentclock/clockwork/internal/anticipate"
	"github.com/agentclock/clockwork/internal/app"
	"github.com/agentclock/clockwork/internal/auth"
)

func main() {
	plans := flag.Int("plans", 40, "plans (one ANTICIPATE each)")
	spans := flag.Int("spans", 250, "tool spans exported to each plan (two events each)")
	batch := flag.Int("batch", 50, "spans per export request")
	conns := flag.Int("conns", 8, "export requests at once")
	seed := flag.String("seed", "internal/anticipate/testdata/seed_anticipate.json", "the ANTICIPATE declared, renamed per plan")
	flag.Parse()
	if err := run(*plans, *spans, *batch, *conns, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "otlpload:", err)
		os.Exit(1)
	}
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func run(plans, spans, batch, conns int, seedPath string) error {
	dir, err := os.MkdirTemp("", "otlpload-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	token := auth.Generate()
	authn, _ := auth.New([]auth.TokenSpec{{Token: token, Principal: "load", Scopes: auth.AllScopes, Agents: []string{"*"}}})
	a, err := app.Start(app.Config{DataDir: dir, Auth: authn, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer a.Close()
	srv := httptest.NewServer(a.Handler)
	defer srv.Close()
	post := func(path, ct string, body []byte) ([]byte, error) {
		req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, out)
		}
		return out, nil
	}
	raw, err := os.ReadFile(seedPath)
	if err != nil {
		return err
	}
	var agent string
	for p := range plans {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		m["anticipation_id"], m["plan_id"] = fmt.Sprintf("ant-%d", p), fmt.Sprintf("plan-%d", p)
		agent = m["agent_id"].(string)
		b, _ := json.Marshal(m)
		signed, err := anticipate.Sign(b)
		if err != nil {
			return err
		}
		if _, err := post("/v1/anticipations", "application/json", signed); err != nil {
			return err
		}
	}
	str := func(k, v string) *commonv1.KeyValue {
		return &commonv1.KeyValue{Key: k, Value: &commonv1.AnyValue{Value: &commonv1.AnyValue_StringValue{StringValue: v}}}
	}
	var bodies [][]byte
	t0 := uint64(time.Now().UnixNano())
	for p := range plans {
		for s := 0; s < spans; s += batch {
			var list []*tracev1.Span
			for i := s; i < min(s+batch, spans); i++ {
				tid, sid := make([]byte, 16), make([]byte, 8)
				binary.BigEndian.PutUint64(tid, uint64(p+1))
				binary.BigEndian.PutUint64(sid, uint64(p)<<32|uint64(i+1))
				list = append(list, &tracev1.Span{TraceId: tid, SpanId: sid, Name: "execute_tool iam_create_user",
					StartTimeUnixNano: t0 + uint64(i)*1000, EndTimeUnixNano: t0 + uint64(i)*1000 + 500,
					Attributes: []*commonv1.KeyValue{str("gen_ai.operation.name", "execute_tool"), str("gen_ai.tool.name", "iam_create_user"),
						str("gen_ai.tool.call.arguments", `{"username":"alice"}`), str("aigp.plan_id", fmt.Sprintf("plan-%d", p))}})
			}
			b, _ := proto.Marshal(&tracev1.TracesData{ResourceSpans: []*tracev1.ResourceSpans{{
				Resource:   &resourcev1.Resource{Attributes: []*commonv1.KeyValue{str("gen_ai.agent.id", agent)}},
				ScopeSpans: []*tracev1.ScopeSpans{{Spans: list}}}}})
			bodies = append(bodies, b)
		}
	}
	work := make(chan []byte)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	start, c0 := time.Now(), cpu()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				out, err := post("/v1/traces", "application/x-protobuf", b)
				if err == nil && len(out) > 0 {
					err = fmt.Errorf("partial success: %x", out)
				}
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
			}
		}()
	}
	for _, b := range bodies {
		work <- b
	}
	close(work)
	wg.Wait()
	wall, used := time.Since(start), cpu()-c0
	if firstErr != nil {
		return firstErr
	}
	n := plans * spans
	fmt.Printf("OTLP ingest: %d tool spans (%d events) into %d plans, %d spans per request, %d at once, embedded default (fsync per commit)\n", n, 2*n, plans, batch, conns)
	fmt.Printf("  %.0f spans/s (%.0f events/s), wall %v\n", float64(n)/wall.Seconds(), float64(2*n)/wall.Seconds(), wall.Round(time.Millisecond))
	fmt.Printf("  CPU %.0f µs per span (process user+system, client encoding included)\n", float64(used.Microseconds())/float64(n))
	return nil
}
